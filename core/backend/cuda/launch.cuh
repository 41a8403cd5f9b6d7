// PTDP_LAUNCH(grid, block, shmem, stream, kernel)(args...): every kernel launch of the CUDA
// backend. Under nvcc it is `kernel<<<grid, block, shmem, stream>>>(args...)`; in the virtual-GPU
// test build (PTDP_VGPU, vgpu/) the same kernel runs on the host, one fiber per CUDA thread.
// The kernel comes last because template arguments contain commas.
#pragma once
#ifdef PTDP_VGPU
#include <vgpu/launch.h>
#define PTDP_LAUNCH(grid, block, shmem, stream, ...) \
  ::vgpu::launch(#__VA_ARGS__, __FILE__, __LINE__, grid, block, shmem, stream, __VA_ARGS__)
#else
#define PTDP_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#endif
