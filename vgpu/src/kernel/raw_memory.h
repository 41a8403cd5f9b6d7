// The C library's memcpy, memmove and memset, without the host-access check that the vgpu puts in
// front of them (kernel/host_copies.cpp): for the vgpu's own code, which copies and fills device
// memory on behalf of the CUDA runtime, cuBLAS and NCCL it stands in for.
#pragma once
#include <cstddef>

namespace vgpu::kernel {
void* raw_memcpy(void* d, const void* s, size_t n);
void* raw_memmove(void* d, const void* s, size_t n);
void* raw_memset(void* d, int c, size_t n);
}  // namespace vgpu::kernel
