// The CPU checks of `ptdp accept` (a profile of kind = "cpu"), on the measurement harness
// (core/harness): the sgemm rate, STREAM triad bandwidth, and the all-reduce bus bandwidth and the
// p2p bandwidth of the local communicator with the node's ranks (threads of this process); each
// the best of `reps` repetitions against the profile's threshold, its results checked.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "experiments/accept_profile.h"

namespace ptdp {

// The most CPU threads a run may ask for (--threads, a golden file's omp_threads): 4 x this
// machine's hardware threads. More only queue up behind one another (100000 OpenMP threads on two
// cores do not finish).
inline constexpr int kThreadsPerHardwareThread = 4;
int max_threads();

// The gemm, memory, allreduce and p2p checks that `wanted` names, in that order; the GEMM and
// STREAM on `threads` CPU threads.
std::vector<Check> cpu_checks(const AcceptProfile& p, const std::function<bool(const std::string&)>& wanted, int reps,
                              int threads);

// The burn-in's CPU load: the gemm check's sgemm timed again and again for `seconds`; its rate,
// every GEMM's FLOPs over their time (GFLOP/s).
double cpu_gemm_load(const AcceptProfile& p, int threads, double seconds);

}  // namespace ptdp
