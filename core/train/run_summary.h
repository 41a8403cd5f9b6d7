// What a training run measured (TrainingRun::summarise): the medians over its timed iterations,
// its last loss and evaluation, and the state it held; the result row and the closing lines of
// `ptdp train` are made from it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/train/trainer.h"

namespace ptdp {

struct RunSummary {
  int iterations = 0;  // the last iteration run: --iters, or the one a stop request ended it after
  int timed = 0;       // timed iterations (none when a stop request came within --warmup)
  int skipped = 0;     // timed iterations that skipped the optimizer step (f16 overflow, non-finite)
  // Medians over the timed iterations: the slowest rank's time; this rank's forward, backward,
  // pipeline wait, data-parallel and optimizer times; the worst stage's bubble.
  double iter_ms = 0, fwd_ms = 0, bwd_ms = 0, p2p_wait_ms = 0, dp_ms = 0, opt_ms = 0, bubble = 0;
  // The last timed iteration's: bytes this rank sent to other stages, and the most activation
  // bytes the fullest stage stashed at once.
  int64_t p2p_bytes = 0;
  double activation_gb = 0;
  double loss = 0;                   // the last iteration's
  std::optional<double> valid_loss;  // the last evaluation's (--eval-iters)
  std::string data_sources;          // RunData::sources
  // Weights, gradients and optimizer state allocated on this rank (--zero shrinks the last), and
  // the parameters they are for; --zero 3: the most bytes of gathered layers and their gradients.
  int64_t state_bytes = 0, parameters = 0, gathered_bytes = 0;
};

// The medians of a summary from the timed iterations (non-empty) and the worst stage's bubble of
// each; timed: the slowest rank's time in time_ms and the fullest stage's peak_activation_bytes.
void summarise_timed(const std::vector<IterStats>& timed, const std::vector<double>& bubbles, RunSummary& s);

}  // namespace ptdp
