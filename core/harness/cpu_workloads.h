// What a CPU is measured by, as workloads of the harness (harness.h), shared by `ptdp accept`'s
// CPU checks and the CPU microbenchmarks: OpenBLAS sgemm and STREAM's copy and triad.
#pragma once
#include <cstdint>

#include "core/harness/harness.h"

namespace ptdp::harness {

// sgemm y = x w^T at [m, k] x [n, k]^T (x all 0.01, w all 0.02), 2mnk FLOPs in GFLOP/s; the
// check compares y's first and last entries with k x 0.01 x 0.02 and throws when they differ.
Workload sgemm(int64_t m, int64_t n, int64_t k);

// STREAM over f32 arrays of n elements (OpenMP, first touched by the threads that use them), the
// bytes STREAM counts in GB/s (no write-allocate traffic): triad a = b + 3c moves 3 arrays, its
// check throws when a[n/2] is not 7; copy a = b moves 2 and is not checked.
Workload stream_triad(int64_t n);
Workload stream_copy(int64_t n);

}  // namespace ptdp::harness
