// How the ranks of a training run go through a phase that one rank can fail alone (opening files,
// loading and saving checkpoints): every rank then ends with the first failing rank's cause, at
// once, instead of the others waiting for it until --comm-timeout.
#pragma once
#include <exception>
#include <functional>

#include "core/comm/communicator.h"

namespace ptdp {

// Runs fn on this rank of `launched` (the world as launched: MPI processes or thread ranks).
// Processes agree on the outcome (core/comm/agreement.h); thread ranks meet at a barrier, as a
// failing thread marks their world failed (run_local_ranks).
void rank_phase(Communicator& launched, const std::function<void()>& fn);

// A rank that fails outside a phase (in a training step): under MPI it names itself and its cause
// and ends every process at once (MPI_Abort), unless every rank already agreed on the failure;
// thread ranks stop each other (run_local_ranks).
void stop_others_if_processes(Communicator& launched, const std::exception& e);

}  // namespace ptdp
