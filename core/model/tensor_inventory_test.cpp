// The model's tensor inventory: the parameter layout is its tables in order, and its counts are
// the closed forms of the architectures.
#include "core/model/tensor_inventory.h"

#include <gtest/gtest.h>

#include "core/model/params.h"

namespace ptdp {
namespace {

TEST(TensorInventory, TheParameterLayoutIsTheInventoryInOrder) {
  for (const char* name : {"tiny", "llama-tiny-gqa"}) {
    const ModelConfig c = preset_config(name);
    const int t = 2;
    const ModelTensors m = model_tensors(c, c.padded_vocab(t));
    const ParamLayout layout(c, ShardSpec{.tp_size = t, .tp_rank = 1});
    std::vector<const ModelTensor*> want;
    for (const ModelTensor& x : m.first) want.push_back(&x);
    for (int l = 0; l < c.layers; ++l)
      for (const ModelTensor& x : m.layer) want.push_back(&x);
    for (const ModelTensor& x : m.last) want.push_back(&x);
    ASSERT_EQ(layout.entries().size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      const ParamEntry& e = layout.entries()[i];
      EXPECT_TRUE(e.name.ends_with(want[i]->name)) << name << ": " << e.name;
      EXPECT_EQ(e.full_shape, want[i]->shape) << e.name;
      EXPECT_EQ(e.split_dim, want[i]->split_dim) << e.name;
      EXPECT_EQ(shape_numel(e.shape), want[i]->numel_per_rank(t)) << e.name;
      EXPECT_EQ(e.decay, !want[i]->small()) << e.name;
    }
    EXPECT_EQ(layout.total(),
              ModelTensors::sum_numel(m.first, t) + c.layers * m.layer_numel(t) + ModelTensors::sum_numel(m.last, t))
        << name;
  }
}

TEST(TensorInventory, ALayersCountsAreTheArchitecturesClosedForms) {
  const ModelConfig gpt = preset_config("gpt3-175b");
  const double h = gpt.hidden;
  for (int t : {1, 8}) {
    const ModelTensors m = model_tensors(gpt, gpt.padded_vocab(t));
    EXPECT_EQ(double(m.layer_numel(t)), 12 * h * h / t + 7 * h / t + 6 * h);  // biases, two LayerNorms
    EXPECT_EQ(m.layer.size(), 12u);
    const ModuleGemm proj = module_gemm(m, kModuleProj, t);
    EXPECT_EQ(proj.out, gpt.hidden);
    EXPECT_EQ(proj.in, gpt.hidden / t);
    EXPECT_EQ(logits_gemm(m, t).out, gpt.padded_vocab(t) / t);
  }
  const ModelConfig llama = preset_config("llama2-70b");  // 8 query groups, f = 28672
  const ModelTensors m = model_tensors(llama, llama.padded_vocab(8));
  const int64_t lh = llama.hidden, f = llama.ffn_hidden(), qkv = lh + 2 * 8 * 128;
  EXPECT_EQ(m.layer_numel(8), (lh * qkv + lh * lh + 3 * lh * f) / 8 + 2 * lh);  // two RMSNorms
  const ModuleGemm fc = module_gemm(m, kModuleFc, 8);  // gate and up: one GEMM
  EXPECT_EQ(fc.out, 2 * f / 8);
  EXPECT_EQ(fc.in, lh);
  EXPECT_EQ(m.module_numel(kModuleFc, 8, true), 0);  // no biases
  EXPECT_FALSE(m.tied);
  EXPECT_EQ(&m.output(), &m.last.back());
}

TEST(TensorInventory, AModulesTensorsComeMatrixAndBiasFirstThenItsNorm) {
  const ModelTensors m = model_tensors(preset_config("tiny"), 256);
  std::vector<std::string> names;
  for (const ModelTensor* x : m.module_tensors(kModuleQkv)) names.push_back(x->name);
  EXPECT_EQ(names, (std::vector<std::string>{"qkv.weight", "qkv.bias", "ln1.weight", "ln1.bias"}));
  EXPECT_STREQ(layer_module_name(kModuleFc), "fc");
}

}  // namespace
}  // namespace ptdp
