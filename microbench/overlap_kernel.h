// The stand-in for one NCCL collective's kernel in bench_overlap_cuda: `ctas` thread blocks (NCCL's
// channels, one block each) of 512 threads reduce-copy bf16 data, out = a + b, the inner step of
// a ring all-reduce or reduce-scatter, from and to this GPU's memory.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace ptdp::bench {

// out[i] = a[i] + b[i] for i < n (bf16 values, 16-byte aligned, n a multiple of 8), on `stream`.
void launch_reduce_copy(void* out, const void* a, const void* b, int64_t n, int ctas, cudaStream_t stream);

}  // namespace ptdp::bench
