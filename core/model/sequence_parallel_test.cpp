// Sequence parallelism (--sequence-parallel) on tensor-parallel CPU ranks (threads): the
// gradients of one micro-batch equal those of one rank, the LayerNorm gradients only once they
// are summed over the tensor-parallel group; and the activation bytes a layer keeps equal the
// closed forms of docs/TRAINING.md ("Activation memory per layer"), with and without it.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/model/gpt.h"

namespace ptdp {
namespace {

ModelConfig small(Arch arch) {
  ModelConfig c;
  c.name = "sp";
  c.arch = arch;
  c.layers = 2;
  c.hidden = 16;
  c.heads = 4;
  c.seq_length = 8;
  c.vocab_size = 40;
  return c;
}

void batch(int b, const ModelConfig& c, Tensor& tokens, Tensor& targets) {
  const int64_t n = int64_t(b) * c.seq_length;
  tokens = Tensor::empty({n}, DType::I32);
  targets = Tensor::empty({n}, DType::I32);
  for (int64_t i = 0; i < n; ++i) {
    tokens.data<int32_t>()[i] = int32_t((i * 7919 + 13) % c.vocab_size);
    targets.data<int32_t>()[i] = int32_t((i * 31 + 5) % c.vocab_size);
  }
}

// One micro-batch's forward pass on each of t tensor-parallel CPU ranks (threads), then
// `after(rank, model, cache, loss_sum)` on that rank.
template <class Fn>
void forward_on_ranks(const ModelConfig& c, int t, int b, Recompute mode, bool sp, DType dt, Fn after) {
  run_local_ranks(t, [&](int rank, Communicator& tp) {
    set_cpu_threads(1);
    auto be = make_cpu_backend();
    ShardSpec shard;
    shard.tp_size = t;
    shard.tp_rank = rank;
    shard.sequence_parallel = sp;
    Gpt model(c, shard, *be, dt, t > 1 ? &tp : nullptr);
    model.init(7);
    Tensor tokens, targets;
    batch(b, c, tokens, targets);
    double sum = 0;
    auto cache = model.forward(b, tokens, &targets, mode, nullptr, &sum);
    after(rank, model, *cache, sum);
  });
}

// Every logical gradient element of one micro-batch (f64), by parameter name; with t > 1 from
// tensor-parallel shards with sequence parallelism on. sum_norms: call
// sum_sequence_parallel_grads() after the backward pass (what the trainer does).
struct Grads {
  double loss = 0;
  std::map<std::string, std::vector<double>> g;
};

Grads gradients(const ModelConfig& c, int t, int b, Recompute mode, bool sum_norms) {
  Grads out;
  std::mutex mu;
  forward_on_ranks(c, t, b, mode, t > 1, DType::F64, [&](int rank, Gpt& model, Gpt::Cache& cache, double sum) {
    const double n = double(b) * c.seq_length;
    model.backward(cache, 1.0 / n, nullptr, nullptr);
    if (sum_norms) model.sum_sequence_parallel_grads();
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) out.loss = sum / n;
    for (const ParamEntry& e : model.layout().entries()) {
      std::vector<double>& full = out.g[e.name];
      const int64_t logical = shape_numel(e.full_shape) * (has_vocab_rows(e.name) ? 4 : 1);  // room for padding
      if (full.empty()) full.assign(logical, 0.0);
      const double* p = model.grad(e.name).data<double>();
      // Replicated tensors: tensor-parallel rank 0's copy (each rank's own when checked apart).
      if (e.split_dim < 0 && rank != 0) continue;
      for (int64_t i = 0; i < shape_numel(e.shape); ++i) {
        const int64_t at = ParamLayout::logical_index(e, i);
        if (at < logical) full[at] = p[i];
      }
    }
  });
  return out;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    norm = std::max(norm, std::abs(a[i]));
  }
  return diff / std::max(norm, 1e-300);
}

bool norm_param(const std::string& name) {
  return name.rfind("lnf.", 0) == 0 || name.find(".ln1.") != std::string::npos ||
         name.find(".ln2.") != std::string::npos;
}

void expect_gradients_of_one_rank(Arch arch, int t, int b, Recompute mode) {
  const ModelConfig c = small(arch);
  const Grads one = gradients(c, 1, b, mode, false);
  const Grads sp = gradients(c, t, b, mode, true);
  EXPECT_NEAR(sp.loss, one.loss, 1e-12 * one.loss);
  int norms = 0;
  for (const auto& [name, g] : one.g) {
    ASSERT_TRUE(sp.g.count(name)) << name;
    EXPECT_LT(max_rel_diff(g, sp.g.at(name)), 1e-10) << name << " t=" << t << " b=" << b;
    norms += norm_param(name);
  }
  EXPECT_EQ(norms, arch == Arch::Gpt ? 2 * 2 * c.layers + 2 : 2 * c.layers + 1);
}

TEST(SequenceParallelGradient, GptMatchesOneRank) {
  for (Recompute mode : {Recompute::None, Recompute::Full, Recompute::Selective})
    expect_gradients_of_one_rank(Arch::Gpt, 2, 1, mode);
  expect_gradients_of_one_rank(Arch::Gpt, 4, 2, Recompute::None);
}

TEST(SequenceParallelGradient, LlamaMatchesOneRank) {
  for (Recompute mode : {Recompute::None, Recompute::Selective}) expect_gradients_of_one_rank(Arch::Llama, 2, 1, mode);
  expect_gradients_of_one_rank(Arch::Llama, 4, 2, Recompute::Full);
}

// Without the tensor-parallel sum, every LayerNorm weight and bias gradient holds only the
// contribution of this rank's rows: it differs from one rank's (so the test above would fail),
// and the other gradients are already whole.
TEST(SequenceParallelGradient, LayerNormGradientsArePartialUntilSummedOverTheGroup) {
  for (Arch arch : {Arch::Gpt, Arch::Llama}) {
    const ModelConfig c = small(arch);
    const Grads one = gradients(c, 1, 1, Recompute::None, false);
    const Grads partial = gradients(c, 2, 1, Recompute::None, false);
    for (const auto& [name, g] : one.g) {
      const double rel = max_rel_diff(g, partial.g.at(name));
      if (norm_param(name)) EXPECT_GT(rel, 1e-3) << name;
      else EXPECT_LT(rel, 1e-10) << name;
    }
  }
}

// ---- activation memory ----

struct Sizes {
  int64_t s, b, h, a, t;
};

// docs/TRAINING.md's closed forms (GPT, f32 activations and statistics), in bytes: the
// paper's Table 2 without dropout masks, in 4-byte elements, plus the LayerNorm statistics.
int64_t gpt_layer_bytes_f32(const Sizes& z, Recompute mode, bool sp) {
  const int64_t sbh = z.s * z.b * z.h, sb = z.s * z.b, probs = 4 * z.a * z.s * z.s * z.b / z.t;
  switch (mode) {
    case Recompute::Full: return sp ? 4 * sbh / z.t : 4 * sbh;
    case Recompute::Selective: return sp ? 64 * sbh / z.t + 16 * sb / z.t : 16 * sbh + 48 * sbh / z.t + 16 * sb;
    case Recompute::None:
      return sp ? 64 * sbh / z.t + probs + 16 * sb / z.t : 16 * sbh + 48 * sbh / z.t + probs + 16 * sb;
  }
  return -1;
}

// The same tensor by tensor (any dtype, GPT or LLaMA), from layer.h's list of kept tensors.
int64_t layer_bytes(const ModelConfig& c, const Sizes& z, Recompute mode, bool sp, int64_t e) {
  const int64_t n = z.s * z.b, nl = sp ? n / z.t : n, h = z.h, f = c.ffn_hidden() / z.t;
  const bool llama = c.arch == Arch::Llama;
  if (mode == Recompute::Full) return e * nl * h;
  int64_t bytes = e * (4 * nl * h                     // x, ln1, x2, ln2
                       + n * 3 * h / z.t + n * h / z.t  // qkv, atty
                       + (llama ? 3 : 2) * n * f);      // fc (gate|up) and act
  bytes += 4 * (llama ? 2 : 4) * nl;                  // rstd (and mean) of both norms, f32
  if (mode == Recompute::None) bytes += e * z.b * (z.a / z.t) * z.s * z.s;  // probs
  return bytes;
}

// Bytes each layer's cache holds after the forward pass of one micro-batch on tensor-parallel
// rank 0 (the same on every rank).
std::vector<int64_t> measured(const ModelConfig& c, int t, int b, Recompute mode, bool sp, DType dt) {
  std::vector<int64_t> out;
  forward_on_ranks(c, t, b, mode, sp, dt, [&](int rank, Gpt& model, Gpt::Cache& cache, double) {
    if (rank == 0)
      for (const LayerCache& l : cache.layers) out.push_back(l.bytes());
    model.backward(cache, 1.0, nullptr, nullptr);  // the collectives of backward, on every rank
  });
  return out;
}

TEST(SequenceParallelMemory, GptLayerKeepsTheClosedFormBytes) {
  const ModelConfig c = preset_config("tiny");  // h = 64, a = 4, s = 32
  const int b = 2;
  for (int t : {2, 4})
    for (Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      const Sizes z{c.seq_length, b, c.hidden, c.heads, t};
      const int64_t without = gpt_layer_bytes_f32(z, mode, false), with = gpt_layer_bytes_f32(z, mode, true);
      EXPECT_EQ(without, layer_bytes(c, z, mode, false, 4));
      EXPECT_EQ(with, layer_bytes(c, z, mode, true, 4));
      for (int64_t got : measured(c, t, b, mode, false, DType::F32)) EXPECT_EQ(got, without) << enum_name(mode);
      for (int64_t got : measured(c, t, b, mode, true, DType::F32)) EXPECT_EQ(got, with) << enum_name(mode);
      // Full recomputation keeps the layer inputs only: sequence parallelism divides them by t.
      if (mode == Recompute::Full) {
        EXPECT_EQ(without, t * with);
      }
    }
  // The numbers of docs/TRAINING.md: tiny, b = 2, t = 2, no recomputation.
  const Sizes z{32, 2, 64, 4, 2};
  EXPECT_EQ(gpt_layer_bytes_f32(z, Recompute::None, false), 181'248);
  EXPECT_EQ(gpt_layer_bytes_f32(z, Recompute::None, true), 147'968);
  EXPECT_EQ(gpt_layer_bytes_f32(z, Recompute::Selective, false), 164'864);
  EXPECT_EQ(gpt_layer_bytes_f32(z, Recompute::Selective, true), 131'584);
}

TEST(SequenceParallelMemory, LlamaAndBf16LayersKeepTheirTensorsBytes) {
  const ModelConfig llama = preset_config("llama-tiny");
  for (Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    const Sizes z{llama.seq_length, 1, llama.hidden, llama.heads, 2};
    for (int64_t got : measured(llama, 2, 1, mode, true, DType::F32))
      EXPECT_EQ(got, layer_bytes(llama, z, mode, true, 4)) << enum_name(mode);
    for (int64_t got : measured(llama, 2, 1, mode, false, DType::F32))
      EXPECT_EQ(got, layer_bytes(llama, z, mode, false, 4)) << enum_name(mode);
  }
  const ModelConfig gpt = preset_config("tiny");
  const Sizes z{gpt.seq_length, 2, gpt.hidden, gpt.heads, 2};
  for (int64_t got : measured(gpt, 2, 2, Recompute::None, true, DType::BF16))
    EXPECT_EQ(got, layer_bytes(gpt, z, Recompute::None, true, 2));
}

}  // namespace
}  // namespace ptdp
