// The stand-in for one NCCL collective's kernel in bench_overlap_cuda: `ctas` thread blocks (NCCL's
// channels, one block each) of 512 threads reduce-copy bf16 data, out = a + b, the inner step of
// a ring all-reduce or reduce-scatter, from and to this GPU's memory. Kernels time themselves with
// the GPU's global timer (ns): CUDA events between two streams' kernels would order them when all
// streams share one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1), the case being measured.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace ptdp::bench {

// out[i] = a[i] + b[i] for i < n (bf16 values, 16-byte aligned, n a multiple of 8), on `stream`;
// stamps[0] = min over blocks of their start, stamps[1] = max of their end (reset them first:
// stamps[0] = UINT64_MAX, stamps[1] = 0).
void launch_reduce_copy(void* out, const void* a, const void* b, int64_t n, int ctas, uint64_t* stamps,
                        cudaStream_t stream);

// *stamp = the global timer when this one-thread kernel runs (after the stream's earlier work).
void launch_stamp(uint64_t* stamp, cudaStream_t stream);

}  // namespace ptdp::bench
