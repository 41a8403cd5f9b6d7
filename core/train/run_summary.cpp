// The closing phases of a training run (core/train/run.h): the loss log and the summary.
#include "core/train/run_summary.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/common/error.h"
#include "core/common/median.h"
#include "core/train/run.h"

namespace ptdp {

namespace {

// --loss-log: iteration,loss,grad_norm,lr,loss_scale,skipped: one line per iteration run, values
// printed to round-trip (skipped: 1 when the update was skipped).
std::string loss_log_csv(const std::vector<std::pair<int, IterStats>>& iters) {
  std::string out = "iteration,loss,grad_norm,lr,loss_scale,skipped\n";
  for (const auto& [it, st] : iters)
    out += fmt::format("{},{},{},{},{},{}\n", it, st.loss, st.grad_norm, st.lr, st.loss_scale, st.skipped ? 1 : 0);
  return out;
}

}  // namespace

void summarise_timed(const std::vector<IterStats>& timed, const std::vector<double>& bubbles, RunSummary& s) {
  PTDP_CHECK(!timed.empty() && bubbles.size() == timed.size(), "a summary needs timed iterations");
  auto med = [&](auto field) {
    std::vector<double> v;
    for (const auto& t : timed) v.push_back(field(t));
    return median(v);
  };
  s.timed = int(timed.size());
  s.iter_ms = med([](const IterStats& t) { return t.time_ms; });
  s.skipped = int(std::count_if(timed.begin(), timed.end(), [](const IterStats& t) { return t.skipped; }));
  s.fwd_ms = med([](const IterStats& t) { return t.fwd_ms; });
  s.bwd_ms = med([](const IterStats& t) { return t.bwd_ms; });
  s.p2p_wait_ms = med([](const IterStats& t) { return t.p2p_wait_ms; });
  s.dp_ms = med([](const IterStats& t) { return t.dp_ms; });
  s.opt_ms = med([](const IterStats& t) { return t.opt_ms; });
  s.p2p_bytes = timed.back().p2p_bytes;
  s.bubble = median(bubbles);
  s.activation_gb = double(timed.back().peak_activation_bytes) / 1e9;
}

// World rank 0 writes the loss log; its failure ends every rank with the cause.
void TrainingRun::write_loss_log() {
  phase([&] {
    if (rank0() && !c_.loss_log.empty()) write_user_file(c_.loss_log, loss_log_csv(history_));
  });
  if (o_.log && !c_.loss_log.empty()) o_.log->loss_log_written(history_.size());
}

RunSummary TrainingRun::summarise() const {
  RunSummary s;
  summarise_timed(timed_, bubbles_, s);
  s.iterations = last_;
  s.loss = loss_;
  s.valid_loss = valid_loss_;
  s.data_sources = data_.sources;
  s.state_bytes = trainer_->state_bytes();
  s.parameters = trainer_->parameters();
  if (const ShardedParams* zero3 = trainer_->sharded_params()) s.gathered_bytes = zero3->peak_gathered_bytes();
  return s;
}

}  // namespace ptdp
