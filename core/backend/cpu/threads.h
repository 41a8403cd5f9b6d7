// CPU threads of the calling rank: OpenMP loops and OpenBLAS calls made from this thread use n.
#pragma once

namespace ptdp {

void set_cpu_threads(int n);

// Threads this process may use in all: OMP_NUM_THREADS when it is set to a positive whole number
// (its first entry, as OpenMP reads a nested list), otherwise every core the machine reports.
int cpu_thread_budget();

}  // namespace ptdp
