#include "core/sim/deepspeed_schedule.h"

#include "core/common/error.h"

namespace ptdp::sim {

namespace {

// TrainSchedule._step_to_micro_batch: the micro-batch of step `step` on `stage` and its direction.
struct Step {
  int microbatch;
  bool forward;
};
Step step_to_microbatch(int p, int stage, int step) {
  const bool even_step = step % 2 == 0, even_stage = stage % 2 == 0;
  if (even_step && even_stage) return {step / 2 - stage / 2, true};
  if (!even_step && !even_stage) return {(step - 1) / 2 - stage / 2, true};
  if (even_step) return {step / 2 - p + (stage + 1) / 2, false};  // odd stage
  return {(step - 1) / 2 - p + 1 + stage / 2, false};             // even stage, odd step
}

}  // namespace

std::vector<Action> deepspeed_train_schedule(int p, int m, int stage) {
  PTDP_CHECK(p >= 1 && m >= 1 && stage >= 0 && stage < p, "deepspeed_train_schedule(p={}, m={}, stage={})", p, m, stage);
  auto valid = [m](int k) { return k >= 0 && k < m; };
  const bool has_prev = stage > 0, has_next = stage < p - 1;
  std::vector<Action> out;
  int prev = -1;
  for (int step = 0; step < 2 * (m + p - 1); ++step) {
    const Step st = step_to_microbatch(p, stage, step);
    const int k = st.microbatch;
    if (st.forward) {
      if (valid(k) && has_prev) out.push_back({Op::RecvForward, k, 0});
      if (valid(prev) && has_prev) out.push_back({Op::SendBackward, prev, 0});
      if (valid(k)) out.push_back({Op::Forward, k, 0});
    } else {
      if (valid(prev) && has_next) out.push_back({Op::SendForward, prev, 0});
      if (valid(k) && has_next) out.push_back({Op::RecvBackward, k, 0});
      if (valid(k)) out.push_back({Op::Backward, k, 0});
    }
    prev = k;
  }
  return out;
}

}  // namespace ptdp::sim
