// DeepSpeed's pipeline training schedule (deepspeed/runtime/pipe/schedule.py, TrainSchedule; the
// same from v0.5.0 to 2025) as ptdp's pipeline actions, for the megatron-deepspeed stack's replay.
#pragma once
#include <vector>

#include "core/parallel/schedule.h"

namespace ptdp::sim {

// The actions of `stage` (0..p-1) for m micro-batches. TrainSchedule runs 2(m + p - 1) steps; even
// stages compute forwards on even steps and backwards on odd ones, odd stages the reverse, so that
// neighbours always meet. A forward step receives its activation, then sends the gradient of the
// step before, then computes; a backward step sends the activation of the step before, then
// receives its gradient, then computes. Every send and receive blocks until its peer's matching
// one (ReplayInput::rendezvous). The compute order is 1F1B's.
std::vector<Action> deepspeed_train_schedule(int p, int m, int stage);

}  // namespace ptdp::sim
