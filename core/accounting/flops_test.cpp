// Eq. (2) and Eq. (3) against the paper's Table 1.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/accounting/flops.h"

namespace ptdp {
namespace {

struct Table1Row {
  double params_b, tflops, gpus;
  int heads, hidden, layers, global_batch;
};

// ../shared/paper/table1.csv beside the checkout, else the copy in results/paper/.
std::vector<Table1Row> read_table1() {
  std::ifstream f(std::string(PTDP_SOURCE_DIR) + "/results/paper/table1.csv");
  EXPECT_TRUE(f.good()) << "results/paper/table1.csv is missing";
  std::vector<Table1Row> rows;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::vector<std::string> v;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) v.push_back(cell);
    if (v.size() < 15) continue;
    rows.push_back({std::stod(v[0]), std::stod(v[12]), std::stod(v[6]), std::stoi(v[1]), std::stoi(v[2]),
                    std::stoi(v[3]), std::stoi(v[7])});
  }
  return rows;
}

ModelConfig gpt(int layers, int hidden, int heads) {
  ModelConfig c;
  c.layers = layers, c.hidden = hidden, c.heads = heads, c.seq_length = 2048, c.vocab_size = 51200;
  return c;
}

TEST(PaperAccounting, Eq2MatchesTable1Parameters) {
  auto rows = read_table1();
  ASSERT_EQ(rows.size(), 10u);
  for (const auto& r : rows) {
    double p = params_eq2(gpt(r.layers, r.hidden, r.heads)) / 1e9;
    // The table prints one decimal: the 1.7B row is Eq. (2)'s 1.652B rounded, 3% away in
    // relative terms, so a row passes within 0.5% or within the table's rounding (0.05B).
    bool close = std::abs(p - r.params_b) <= 0.005 * r.params_b || std::abs(p - r.params_b) <= 0.05 + 1e-9;
    EXPECT_TRUE(close) << "Eq. (2) gives " << p << "B for the " << r.params_b << "B row";
  }
}

TEST(PaperAccounting, PresetsAreTheTable1Models) {
  const char* names[] = {"gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18b", "gpt-39b",
                         "gpt-76b",  "gpt-145b", "gpt-310b", "gpt-530b", "gpt-1t"};
  auto rows = read_table1();
  ASSERT_EQ(rows.size(), 10u);
  for (size_t i = 0; i < rows.size(); ++i) {
    ModelConfig c = preset_config(names[i]);
    EXPECT_EQ(c.layers, rows[i].layers) << names[i];
    EXPECT_EQ(c.hidden, rows[i].hidden) << names[i];
    EXPECT_EQ(c.heads, rows[i].heads) << names[i];
  }
}

TEST(PaperAccounting, Eq3ReproducesTable1AggregateThroughput) {
  // Table 1's iteration time is not printed, but F/(n X) from Eq. (3) must give the same
  // iteration time as the paper's DERIVED column (README: 1T row 102.63 s, 1.7B row 3.53 s).
  auto rows = read_table1();
  ASSERT_EQ(rows.size(), 10u);
  ModelConfig c0 = gpt(rows[0].layers, rows[0].hidden, rows[0].heads);
  EXPECT_NEAR(flops_eq3(c0, 512) / 1e15, 15.5, 0.05);
  EXPECT_NEAR(flops_eq3(c0, 512) / (rows[0].gpus * rows[0].tflops * 1e12), 3.53, 0.01);
  ModelConfig c9 = gpt(rows[9].layers, rows[9].hidden, rows[9].heads);
  EXPECT_NEAR(flops_eq3(c9, 3072) / 1e15, 51390.5, 1.0);
  EXPECT_NEAR(flops_eq3(c9, 3072) / (rows[9].gpus * rows[9].tflops * 1e12), 102.63, 0.01);
}

TEST(PaperAccounting, ModelFlopsAreThreeQuartersOfEq3OnTheTransformer) {
  ModelConfig c = gpt(24, 2304, 24);
  c.vocab_size = 0;  // without the logit layer the ratio is exactly 72/96
  EXPECT_NEAR(flops_model(c, 8) / flops_eq3(c, 8), 0.75, 1e-12);
}

// LLaMA-7B (l=32, h=4096, f=11008, V=32000, s=2048), by hand: per layer 4h^2 + 3hf + 2h =
// 202,383,360; 32 layers plus 2Vh + h: 6,738,415,616 (LLaMA's published "6.7B").
TEST(LlamaAccounting, ParametersOfLlama7b) {
  ModelConfig c = preset_config("llama-7b");
  EXPECT_EQ(c.ffn_hidden(), 11008);
  EXPECT_EQ(params_exact(c), 6738415616LL);
  EXPECT_NEAR(params_exact(c) / 1e9, 6.7, 0.05);
}

// Forward per token per layer: 2 (4h^2 + 3hf) + 4sh = 438,304,768; the model adds 2hV.
// B = 2048: model FLOPs 3 B s F_fwd; with full recomputation B s (4 l F_layer + 3 * 2hV).
TEST(LlamaAccounting, FlopsOfLlama7bFromItsMatrices) {
  ModelConfig c = preset_config("llama-7b");
  EXPECT_DOUBLE_EQ(flops_forward_per_token(c), 14287896576.0);
  EXPECT_NEAR(flops_model(c, 2048), 179783345280909312.0, 1e3);
  EXPECT_NEAR(flops_eq3(c, 2048), 238611615413436416.0, 1e3);
  // About 6 N per token for the model FLOPs (N = 6.74B): within the attention term.
  EXPECT_NEAR(flops_model(c, 1) / c.seq_length / (6.0 * params_exact(c)), 1.06, 0.01);
}

// Grouped-query attention. Llama 2 70B (l=80, h=8192, a=64, g=8, f=28672, V=32000), by hand:
// per layer qkv h (h + 2 g h/a) = 83,886,080, proj h^2 = 67,108,864, MLP 3hf = 704,643,072, two
// RMSNorms 2h: 855,654,400; 80 layers plus 2Vh + h: 68,976,648,192 (Meta's "70B", 69.0B in HF's
// model card). Llama 3: V = 128256.
TEST(GqaAccounting, ParametersOfLlama2And3) {
  EXPECT_EQ(params_exact(preset_config("llama2-70b")), 68976648192LL);
  EXPECT_NEAR(params_exact(preset_config("llama2-70b")) / 1e9, 68.98, 0.005);
  EXPECT_EQ(params_exact(preset_config("llama3-8b")), 8030261248LL);
  EXPECT_EQ(params_exact(preset_config("llama3-70b")), 70553706496LL);
  // Without query groups the same sizes would hold 4h^2 per layer for attention: 10.7B more.
  ModelConfig mha = preset_config("llama2-70b");
  mha.query_groups = 0;
  EXPECT_EQ(params_exact(mha) - params_exact(preset_config("llama2-70b")), 80LL * 8192 * (2 * 8192 - 2 * 8 * 128));
}

// Model FLOPs per token are 6 N_matmul + 12 l s h (N_matmul: the parameters of the GEMMs, the
// output layer included, the embedding and norms not), and equal Megatron's
// num_floating_point_operations with GQA: 12 B s l h^2 ((1 + g/a + s/h) + 3f/(2h) + V/(2 l h))
// (before its causal halving of the s/h term).
TEST(GqaAccounting, FlopsAre6NPlusAttentionAndMegatronsFormula) {
  for (const char* name : {"llama2-70b", "llama3-8b", "llama3-70b", "llama-tiny-gqa"}) {
    const ModelConfig c = preset_config(name);
    const double l = c.layers, h = c.hidden, s = c.seq_length, V = double(c.vocab_size), f = c.ffn_hidden();
    const double g = c.groups(), a = c.heads;
    const double n_matmul = double(params_exact(c)) - V * h /* embedding */ - (2 * l + 1) * h /* norms */;
    EXPECT_NEAR(flops_model(c, 1) / s / (6 * n_matmul + 12 * l * s * h), 1.0, 1e-12) << name;
    const double megatron = 12 * s * l * h * h * ((1 + g / a + s / h) + 1.5 * f / h + V / (2 * l * h));
    EXPECT_NEAR(flops_model(c, 1) / megatron, 1.0, 1e-12) << name;
    // Full recomputation adds one forward of the layers: Eq. (3) generalised.
    const double layer = (flops_forward_per_token(c) - 2 * h * V) / l;
    EXPECT_NEAR(flops_eq3(c, 2) / (2 * s * (4 * l * layer + 3 * 2 * h * V)), 1.0, 1e-12) << name;
  }
  // Llama 2 70B: 2 h (h + 2 g h/a) + 2 h^2 + 6 h f + 4 s h per layer and token, forward.
  const ModelConfig c = preset_config("llama2-70b");
  EXPECT_DOUBLE_EQ(flops_forward_per_token(c),
                   80 * (2.0 * 8192 * 10240 + 2.0 * 8192 * 8192 + 6.0 * 8192 * 28672 + 4.0 * 4096 * 8192) +
                       2.0 * 8192 * 32000);
}

// GPT with query groups (or another MLP size) leaves the paper's Eq. (3), which assumes 3h^2 for
// QKV and a 4h MLP, for the same count from its matrices; with groups = heads nothing changes.
TEST(GqaAccounting, GptWithGroupsCountsItsSmallerQkv) {
  ModelConfig c = gpt(24, 2304, 24);
  const double eq3 = flops_eq3(c, 8), model = flops_model(c, 8);
  const int64_t params = params_exact(c);
  c.query_groups = 24;  // as many groups as heads: multi-head attention
  EXPECT_EQ(flops_eq3(c, 8), eq3);
  EXPECT_EQ(params_exact(c), params);
  c.query_groups = 4;
  // Per layer 2 (h - g hd) fewer key and value columns: dw fewer weights, as many bias entries.
  const double h = 2304, cols = 2 * (h - 4.0 * 96), dw = h * cols;
  EXPECT_EQ(params_exact(c), params - int64_t(24 * (dw + cols)));
  EXPECT_NEAR((model - flops_model(c, 8)) / (3.0 * 8 * 2048 * 24 * 2 * dw), 1.0, 1e-9);
  EXPECT_NEAR((eq3 - flops_eq3(c, 8)) / (4.0 * 8 * 2048 * 24 * 2 * dw), 1.0, 1e-9);
}

TEST(LlamaAccounting, GptKeepsThePapersEquations) {
  ModelConfig c = gpt(24, 2304, 24);
  EXPECT_NEAR(flops_eq3(c, 8) / (8.0 * 2048 * (4 * 24 * (24.0 * 2304 * 2304 + 4.0 * 2048 * 2304) +
                                                 3 * 2.0 * 2304 * 51200)),
              1.0, 1e-12);
  EXPECT_NEAR(flops_model(c, 8) / (3.0 * 8 * 2048 * flops_forward_per_token(c)), 1.0, 1e-12);
}

// Megatron-LM's num_floating_point_operations (training.py), which its log's "throughput per GPU"
// divides: values worked out with its formula in Python (causal attention halved, the vocabulary
// padded to 128 x t, SwiGLU's three matrices, grouped-query attention's narrower K and V).
TEST(MegatronAccounting, FlopsAreMegatronsNumFloatingPointOperations) {
  const ModelConfig tiny = preset_config("tiny");
  EXPECT_DOUBLE_EQ(flops_megatron(tiny, 8, 1), 339738624.0);
  // Full attention and the unpadded vocabulary (ptdp's model FLOPs) count 3.7% more for tiny.
  EXPECT_NEAR(flops_model(tiny, 8) / flops_megatron(tiny, 8, 1), 1.037037037, 1e-9);
  ModelConfig padded = tiny;
  padded.vocab_size = 300;  // padded to 512 for t = 2
  EXPECT_DOUBLE_EQ(flops_megatron(padded, 8, 2), 364904448.0);
  ModelConfig llama = preset_config("llama-7b");
  llama.seq_length = 4096;
  EXPECT_DOUBLE_EQ(flops_megatron(llama, 1, 8), 175646982537216.0);
  const ModelConfig gqa = preset_config("llama-tiny-gqa");
  EXPECT_DOUBLE_EQ(flops_megatron(gqa, 4, 1), 207618048.0);
}

}  // namespace
}  // namespace ptdp
