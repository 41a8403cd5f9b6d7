// The local communicator: ranks are threads of one process sharing memory. Collectives meet at
// a barrier that sleeps (condition variable) instead of spinning, read each other's buffers
// directly and reduce in rank order, so every rank gets bitwise the same result.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/comm/communicator.h"

namespace ptdp {

// n communicators forming one world; thread i uses result[i].
std::vector<std::unique_ptr<Communicator>> make_local_world(int n,
                                                           std::chrono::milliseconds timeout = std::chrono::seconds(300));

// Runs fn(rank, comm) on n threads, one rank each, and waits for all. If a rank throws, the
// world is marked failed (the others' pending and later calls fail at once) and the first
// failure is rethrown here, after every thread has finished.
void run_local_ranks(int n, const std::function<void(int rank, Communicator& comm)>& fn,
                     std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace ptdp
