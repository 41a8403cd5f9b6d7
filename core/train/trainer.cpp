#include "core/train/trainer.h"

#include <chrono>
#include <vector>

namespace ptdp {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void load_microbatch(const SampleSource& data, int64_t first, int b, Tensor& tokens, Tensor& targets) {
  const int s = data.seq_len();
  std::vector<int32_t> buf(s + 1);
  int32_t* tok = tokens.data<int32_t>();
  int32_t* tgt = targets.data<int32_t>();
  for (int j = 0; j < b; ++j) {
    data.get(first + j, buf.data());
    for (int i = 0; i < s; ++i) {
      tok[int64_t(j) * s + i] = buf[i];
      tgt[int64_t(j) * s + i] = buf[i + 1];
    }
  }
}

Trainer::Trainer(Gpt& model, const SampleSource& data, const TrainConfig& cfg, const TrainerGroups& groups)
    : model_(model), data_(data), cfg_(cfg), groups_(groups) {
  PTDP_CHECK(cfg.micro_batch > 0 && cfg.global_batch % (cfg.micro_batch * dp_size()) == 0,
             "the global batch must be a multiple of micro-batch x data-parallel size");
  PTDP_CHECK(data.seq_len() == model.config().seq_length, "data and model disagree on the sequence length");
  opt_ = std::make_unique<AdamW>(model.backend(), model.layout(), model.params(), model.grads(), cfg.optimizer);
  opt_->set_norm_group(groups.mp, model.shard().tp_rank);
  sync_ = std::make_unique<GradSync>(model.grads(), groups.dp, cfg.grad_bucket_elems, cfg.overlap_grad_reduce);
}

IterStats Trainer::step() {
  IterStats st;
  st.iteration = ++iteration_;
  const auto t0 = std::chrono::steady_clock::now();
  const int b = cfg_.micro_batch, s = model_.config().seq_length;
  const int64_t n = int64_t(b) * s;
  const double tokens_in_batch = double(cfg_.global_batch) * s;
  model_.zero_grads();
  Tensor tokens = Tensor::empty({n}, DType::I32), targets = Tensor::empty({n}, DType::I32);
  double loss_sum = 0;
  // This data-parallel rank's contiguous share of the global batch.
  const int64_t first_sample =
      (iteration_ - 1) * cfg_.global_batch + int64_t(dp_rank()) * (cfg_.global_batch / dp_size());
  const int m = num_microbatches();
  for (int k = 0; k < m; ++k) {
    load_microbatch(data_, first_sample + int64_t(k) * b, b, tokens, targets);
    auto tf = std::chrono::steady_clock::now();
    double mb_loss = 0;
    auto cache = model_.forward(b, tokens, &targets, cfg_.recompute, nullptr, &mb_loss);
    st.fwd_ms += ms_since(tf);
    st.peak_activation_bytes = std::max(st.peak_activation_bytes, cache->bytes());
    loss_sum += mb_loss;
    auto tb = std::chrono::steady_clock::now();
    const bool last = k == m - 1;
    if (last) sync_->begin();
    model_.backward(*cache, 1.0 / tokens_in_batch, nullptr, nullptr,
                    last ? [this](int64_t off) { sync_->ready_from(off); } : std::function<void(int64_t)>());
    st.bwd_ms += ms_since(tb);
  }
  sync_->finish();
  if (groups_.dp && groups_.dp->size() > 1) {
    Tensor l = Tensor::empty({1}, DType::F64);
    l.data<double>()[0] = loss_sum;
    groups_.dp->all_reduce(l, ReduceOp::Sum);
    loss_sum = l.data<double>()[0];
  }
  st.loss = loss_sum / tokens_in_batch;
  auto to = std::chrono::steady_clock::now();
  StepInfo info = opt_->step();
  st.opt_ms = ms_since(to);
  st.grad_norm = info.grad_norm;
  st.lr = info.lr;
  st.time_ms = ms_since(t0);
  return st;
}

}  // namespace ptdp
