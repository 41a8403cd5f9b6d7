// The whole GPT and LLaMA models against finite differences in f64, recomputation modes, initialisation and
// parameter accounting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/model/gpt.h"
#include "core/accounting/flops.h"
#include "core/testing/gradcheck.h"

namespace ptdp {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.name = "gradcheck";
  c.layers = 2;
  c.hidden = 16;
  c.heads = 2;
  c.seq_length = 8;
  c.vocab_size = 40;  // padded to 128: the padded rows must stay out of the loss
  return c;
}

struct Batch {
  Tensor tokens, targets;
};

Batch random_batch(int b, int s, int64_t vocab, uint64_t seed) {
  Batch bt{Tensor::empty({int64_t(b) * s}, DType::I32), Tensor::empty({int64_t(b) * s}, DType::I32)};
  for (int64_t i = 0; i < bt.tokens.numel(); ++i) {
    bt.tokens.data<int32_t>()[i] = int32_t((i * 7919 + seed * 104729) % vocab);
    bt.targets.data<int32_t>()[i] = int32_t((i * 31 + seed * 17 + 5) % vocab);
  }
  return bt;
}

// Mean loss and its gradient (into model.grads()) for one micro-batch.
double loss_and_grad(Gpt& model, const Batch& bt, int b, Recompute mode, bool backward) {
  double sum = 0;
  auto cache = model.forward(b, bt.tokens, &bt.targets, mode, nullptr, &sum);
  const double n = double(b) * model.config().seq_length;
  if (backward) {
    model.zero_grads();
    model.backward(*cache, 1.0 / n, nullptr, nullptr);
  }
  return sum / n;
}

// Every parameter's gradient against central differences; the padded vocabulary rows of the
// embedding (and of llama's separate output layer) get exactly zero.
void expect_whole_model_gradient_matches(Arch arch, int heads = 2, int groups = 0) {
  auto be = make_cpu_backend();
  ModelConfig c = small_config();
  c.arch = arch;
  c.heads = heads;
  c.query_groups = groups;
  Gpt model(c, ShardSpec{}, *be, DType::F64);
  model.init(42);
  // Larger weights than Megatron's 0.02 make every path of the gradient non-negligible.
  testing::fill_normal(model.params(), 3, 0.3);
  const int b = 2;
  Batch bt = random_batch(b, c.seq_length, c.vocab_size, 1);
  loss_and_grad(model, bt, b, Recompute::None, true);
  Tensor analytic = model.grads().clone();
  auto objective = [&] { return loss_and_grad(model, bt, b, Recompute::None, false); };
  for (const auto& e : model.layout().entries()) {
    Tensor p = model.params().view(e.offset, e.shape);
    Tensor g = analytic.view(e.offset, e.shape);
    const bool vocab_rows = has_vocab_rows(e.name);
    if (vocab_rows) {  // only the real vocabulary rows; padded rows are checked below
      p = p.slice_rows(0, c.vocab_size);
      g = g.slice_rows(0, c.vocab_size);
    }
    EXPECT_LT(testing::grad_rel_error(objective, p, g, 512), 1e-6) << e.name;
    if (!vocab_rows) continue;
    Tensor all = analytic.view(e.offset, e.shape);
    for (int64_t i = c.vocab_size * c.hidden; i < all.numel(); ++i) ASSERT_EQ(all.data<double>()[i], 0.0) << e.name;
  }
}

TEST(GptGradient, WholeModelMatchesFiniteDifferencesInF64) { expect_whole_model_gradient_matches(Arch::Gpt); }

TEST(LlamaGradient, WholeModelMatchesFiniteDifferencesInF64) { expect_whole_model_gradient_matches(Arch::Llama); }

void expect_recomputation_identical(Arch arch, int heads = 2, int groups = 0) {
  auto be = make_cpu_backend();
  ModelConfig c = small_config();
  c.arch = arch;
  c.heads = heads;
  c.query_groups = groups;
  Gpt model(c, ShardSpec{}, *be, DType::F64);
  model.init(7);
  Batch bt = random_batch(3, c.seq_length, c.vocab_size, 2);
  const double base = loss_and_grad(model, bt, 3, Recompute::None, true);
  Tensor g0 = model.grads().clone();
  for (Recompute mode : {Recompute::Full, Recompute::Selective}) {
    EXPECT_EQ(loss_and_grad(model, bt, 3, mode, true), base) << enum_name(mode);
    for (int64_t i = 0; i < g0.numel(); ++i)
      ASSERT_EQ(model.grads().data<double>()[i], g0.data<double>()[i]) << enum_name(mode) << " at " << i;
  }
}

TEST(GptGradient, RecomputationGivesIdenticalLossAndGradients) { expect_recomputation_identical(Arch::Gpt); }

TEST(LlamaGradient, RecomputationGivesIdenticalLossAndGradients) { expect_recomputation_identical(Arch::Llama); }

// Grouped-query attention (4 heads of size 4 sharing 2 key/value heads; one shared by all: MQA).
TEST(GqaGradient, WholeModelMatchesFiniteDifferencesInF64) {
  expect_whole_model_gradient_matches(Arch::Gpt, 4, 2);
  expect_whole_model_gradient_matches(Arch::Llama, 4, 2);
  expect_whole_model_gradient_matches(Arch::Llama, 4, 1);
}

TEST(GqaGradient, RecomputationGivesIdenticalLossAndGradients) {
  expect_recomputation_identical(Arch::Gpt, 4, 2);
  expect_recomputation_identical(Arch::Llama, 4, 2);
}

// A GQA model is the multi-head model whose heads of a group hold copies of the group's key and
// value: with the QKV rows laid out per head (q, the group's k, the group's v) from Megatron-core's
// per-group rows, both give the same loss; the GQA query gradients are the MHA ones and each
// group's key (value) gradient is the sum of its heads'.
void expect_gqa_equals_mha_with_shared_keys(Arch arch) {
  auto be = make_cpu_backend();
  ModelConfig gc = small_config();
  gc.arch = arch, gc.heads = 4, gc.query_groups = 2;
  ModelConfig mc = gc;
  mc.query_groups = 0;
  Gpt gqa(gc, ShardSpec{}, *be, DType::F64), mha(mc, ShardSpec{}, *be, DType::F64);
  gqa.init(5);
  testing::fill_normal(gqa.params(), 9, 0.3);
  const int a = gc.heads, g = gc.groups(), r = a / g, hd = gc.head_dim();
  // Row of the GQA qkv that row (head j, part p, element i) of the MHA qkv copies.
  auto source_row = [&](int j, int part, int i) {
    const int block = part == 0 ? j % r : r + part - 1;
    return (j / r) * (r + 2) * hd + block * hd + i;
  };
  for (const auto& e : mha.layout().entries()) {
    const ParamEntry& src = gqa.layout().at(e.name);
    const double* from = gqa.params().data<double>() + src.offset;
    double* to = mha.params().data<double>() + e.offset;
    const bool qkv = e.name.find(".qkv.") != std::string::npos;
    if (!qkv) {
      ASSERT_EQ(e.shape, src.shape) << e.name;
      std::copy(from, from + shape_numel(e.shape), to);
      continue;
    }
    const int64_t cols = e.shape.size() == 2 ? e.shape[1] : 1;
    for (int j = 0; j < a; ++j)
      for (int part = 0; part < 3; ++part)
        for (int i = 0; i < hd; ++i)
          std::copy(from + source_row(j, part, i) * cols, from + (source_row(j, part, i) + 1) * cols,
                    to + ((j * 3 + part) * hd + i) * cols);
  }
  const int b = 2;
  Batch bt = random_batch(b, gc.seq_length, gc.vocab_size, 4);
  const double lg = loss_and_grad(gqa, bt, b, Recompute::None, true);
  const double lm = loss_and_grad(mha, bt, b, Recompute::None, true);
  EXPECT_NEAR(lg, lm, 1e-12 * std::abs(lm));
  for (const auto& e : gqa.layout().entries()) {
    const ParamEntry& m = mha.layout().at(e.name);
    const double* gg = gqa.grads().data<double>() + e.offset;
    const double* mg = mha.grads().data<double>() + m.offset;
    if (e.name.find(".qkv.") == std::string::npos) {
      for (int64_t i = 0; i < shape_numel(e.shape); ++i) ASSERT_NEAR(gg[i], mg[i], 1e-11) << e.name << " " << i;
      continue;
    }
    const int64_t cols = e.shape.size() == 2 ? e.shape[1] : 1;
    std::vector<double> want(size_t(shape_numel(e.shape)), 0.0);
    for (int j = 0; j < a; ++j)
      for (int part = 0; part < 3; ++part)
        for (int i = 0; i < hd; ++i)
          for (int64_t c = 0; c < cols; ++c)
            want[size_t(source_row(j, part, i) * cols + c)] += mg[((j * 3 + part) * hd + i) * cols + c];
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(gg[i], want[i], 1e-11) << e.name << " " << i;
  }
}

TEST(GqaModel, EqualsMultiHeadAttentionWithEachGroupsKeysAndValuesCopiedToItsHeads) {
  expect_gqa_equals_mha_with_shared_keys(Arch::Gpt);
  expect_gqa_equals_mha_with_shared_keys(Arch::Llama);
}

// What a layer keeps: the compact QKV ((a + 2g) hd columns), not the keys and values expanded to
// every head.
TEST(GqaModel, LayersKeepTheCompactQkv) {
  auto be = make_cpu_backend();
  ModelConfig c = small_config();
  c.heads = 4, c.query_groups = 1, c.arch = Arch::Llama;
  Gpt model(c, ShardSpec{}, *be, DType::F32);
  model.init(1);
  Batch bt = random_batch(2, c.seq_length, c.vocab_size, 3);
  double sum = 0;
  auto cache = model.forward(2, bt.tokens, &bt.targets, Recompute::Selective, nullptr, &sum);
  for (const LayerCache& l : cache->layers)
    EXPECT_EQ(l.qkv.shape(), (Shape{2 * c.seq_length, (4 + 2 * 1) * c.head_dim()}));
}

TEST(GqaParams, QkvHoldsTheQueryHeadsAndOneKeyAndValuePerGroup) {
  ModelConfig c = preset_config("llama2-70b");
  EXPECT_EQ(c.groups(), 8);
  EXPECT_EQ(c.qkv_width(), (64 + 2 * 8) * 128);
  ParamLayout full(c, ShardSpec{1, 0, 0, 1});
  EXPECT_EQ(full.at("layers.0.qkv.weight").shape, (Shape{10240, 8192}));
  ParamLayout shard(c, ShardSpec{8, 3, 0, 1});  // t = 8: one whole group (8 queries, k, v) per rank
  EXPECT_EQ(shard.at("layers.0.qkv.weight").shape, (Shape{1280, 8192}));
  EXPECT_EQ(shard.at("layers.0.qkv.weight").split_offset, 3 * 1280);
  EXPECT_EQ(shard.at("layers.0.gate.weight").shape, (Shape{28672 / 8, 8192}));
}

TEST(GptGradient, FullRecomputationKeepsOnlyLayerInputs) {
  auto be = make_cpu_backend();
  ModelConfig c = small_config();
  Gpt model(c, ShardSpec{}, *be, DType::F32);
  model.init(1);
  Batch bt = random_batch(2, c.seq_length, c.vocab_size, 3);
  double sum = 0;
  auto none = model.forward(2, bt.tokens, &bt.targets, Recompute::None, nullptr, &sum);
  auto sel = model.forward(2, bt.tokens, &bt.targets, Recompute::Selective, nullptr, &sum);
  auto full = model.forward(2, bt.tokens, &bt.targets, Recompute::Full, nullptr, &sum);
  for (size_t l = 0; l < full->layers.size(); ++l)
    EXPECT_EQ(full->layers[l].bytes(), 2 * c.seq_length * c.hidden * 4);  // the input only
  EXPECT_LT(sel->bytes(), none->bytes());
  EXPECT_LT(full->bytes(), sel->bytes());
  // The shard's input is its first layer's kept input: counted once.
  ASSERT_EQ(full->x_in.raw(), full->layers.front().x.raw());
  int64_t expect = 0;
  for (const LayerCache& l : full->layers) expect += l.bytes();
  for (const Tensor* t : {&full->xl, &full->lnf, &full->mean, &full->rstd, &full->logits, &full->max, &full->sum_exp})
    if (t->defined()) expect += t->nbytes();
  EXPECT_EQ(full->bytes(), expect);
}

// A chunk of no transformer layer that holds the loss (Megatron-core's standalone loss stage): the
// final LayerNorm's input is the chunk's input, counted once; its gradient goes back as dx_in.
TEST(GptGradient, ALossOnlyChunkCountsItsInputOnceAndPassesItsGradientBack) {
  auto be = make_cpu_backend();
  ModelConfig c = small_config();
  ShardSpec loss_only;
  loss_only.layer_begin = loss_only.layer_end = c.layers;
  loss_only.pre = false;
  Gpt model(c, loss_only, *be, DType::F32);
  model.init(1);
  Batch bt = random_batch(2, c.seq_length, c.vocab_size, 3);
  Tensor x = Tensor::empty({2 * int64_t(c.seq_length), c.hidden}, DType::F32);
  be->fill(x, 0.5);
  double sum = 0;
  auto cache = model.forward(2, x, &bt.targets, Recompute::None, nullptr, &sum);
  ASSERT_TRUE(cache->layers.empty());
  ASSERT_EQ(cache->xl.raw(), cache->x_in.raw());
  int64_t expect = 0;
  for (const Tensor* t : {&cache->x_in, &cache->lnf, &cache->mean, &cache->rstd, &cache->logits, &cache->max,
                          &cache->sum_exp})
    expect += t->nbytes();
  EXPECT_EQ(cache->bytes(), expect);
  Tensor dx;
  model.backward(*cache, 1.0, nullptr, &dx);
  ASSERT_EQ(dx.numel(), x.numel());
  EXPECT_GT(be->sum_squares(dx), 0);
}

TEST(GptInit, InitialLossIsLogVocab) {
  auto be = make_cpu_backend();
  ModelConfig c;
  c.layers = 4, c.hidden = 64, c.heads = 4, c.seq_length = 32, c.vocab_size = 256;
  Gpt model(c, ShardSpec{}, *be, DType::F32);
  model.init(1234);
  Batch bt = random_batch(4, c.seq_length, c.vocab_size, 4);
  double sum = 0;
  model.forward(4, bt.tokens, &bt.targets, Recompute::None, nullptr, &sum);
  EXPECT_NEAR(sum / (4.0 * c.seq_length), std::log(256.0), 0.1);
}

TEST(GptInit, FollowsMegatronInitialisation) {
  auto be = make_cpu_backend();
  ModelConfig c;
  c.layers = 8, c.hidden = 128, c.heads = 4, c.seq_length = 64, c.vocab_size = 512;
  Gpt model(c, ShardSpec{}, *be, DType::F64);
  model.init(9);
  auto stddev = [&](const std::string& name) {
    Tensor t = model.param(name);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      s += t.data<double>()[i];
      s2 += t.data<double>()[i] * t.data<double>()[i];
    }
    double m = s / t.numel();
    return std::sqrt(s2 / t.numel() - m * m);
  };
  EXPECT_NEAR(stddev("wte"), 0.02, 0.001);
  EXPECT_NEAR(stddev("layers.3.qkv.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("layers.3.fc.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("layers.3.proj.weight"), 0.02 / std::sqrt(16.0), 0.0003);
  EXPECT_NEAR(stddev("layers.3.fc2.weight"), 0.02 / std::sqrt(16.0), 0.0003);
  EXPECT_EQ(model.param("layers.0.ln1.weight").data<double>()[5], 1.0);
  EXPECT_EQ(model.param("layers.0.qkv.bias").data<double>()[5], 0.0);
  // Same seed, same weights; another seed, other weights.
  Gpt again(c, ShardSpec{}, *be, DType::F64);
  again.init(9);
  EXPECT_EQ(again.param("layers.5.fc.weight").data<double>()[77], model.param("layers.5.fc.weight").data<double>()[77]);
  again.init(10);
  EXPECT_NE(again.param("layers.5.fc.weight").data<double>()[77], model.param("layers.5.fc.weight").data<double>()[77]);
}

TEST(GptParams, FlatBufferHoldsExactlyTheModelsParameters) {
  for (const char* name : {"tiny", "small"}) {
    ModelConfig c = preset_config(name);
    ParamLayout layout(c, ShardSpec{});
    EXPECT_EQ(layout.total(), params_exact(c)) << name;  // V=256 needs no padding
    EXPECT_NEAR(double(params_exact(c)), params_eq2(c) + 2.0 * c.hidden, 0.5) << name;
  }
  ModelConfig c = preset_config("tiny");
  c.vocab_size = 250;  // padded to 256
  EXPECT_EQ(ParamLayout(c, ShardSpec{}).total(), params_exact(c) + 6 * c.hidden);
}

TEST(GptParams, PipelineStageHoldsItsLayersAndTheTiedEmbeddingCopy) {
  ModelConfig c = preset_config("tiny");
  ShardSpec first{.layer_begin = 0, .layer_end = 2, .pre = true, .post = false};
  ShardSpec last{.layer_begin = 2, .layer_end = 4, .pre = false, .post = true};
  ParamLayout a(c, first), b(c, last);
  const int64_t vh = c.padded_vocab(1) * c.hidden;
  EXPECT_EQ(a.total() + b.total(), params_exact(c) + vh);  // wte on both ends
  EXPECT_EQ(b.at("layers.2.ln1.weight").offset, vh);
}

}  // namespace
}  // namespace ptdp
