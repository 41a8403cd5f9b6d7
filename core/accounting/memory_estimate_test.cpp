#include "core/accounting/memory_estimate.h"

#include <gtest/gtest.h>

#include "core/common/error.h"
#include "core/config/config_fields.h"

namespace ptdp {
namespace {

// The bounds of the model's fields (core/config/model_fields.cpp).
void check_model_fields(const ModelConfig& m) {
  RunConfig r;
  r.model = m;
  check_field_rules(r);
}

TEST(MemoryEstimate, TinyMatchesTheFormulaInIntegers) {
  const ModelConfig c = preset_config("tiny");  // l=4 h=64 a=4 s=32 V=256 (padded 256)
  const MemoryEstimate e = estimate_single_rank_f32(c, 2, Recompute::None);
  const int64_t h = 64, s = 32, a = 4, l = 4, vp = 256, tokens = 2 * s;
  EXPECT_EQ(e.state_bytes, 16 * (l * (12 * h * h + 13 * h) + (vp + s) * h + 2 * h));
  EXPECT_EQ(e.activation_bytes, 4 * tokens * (l * (16 * h + a * s) + 2 * vp + 16 * h + a * s));
  EXPECT_EQ(e.total(), e.state_bytes + e.activation_bytes);
}

TEST(MemoryEstimate, LlamaStateCountsItsOwnParameters) {
  const ModelConfig c = preset_config("llama-tiny");  // l=4 h=64 s=32 V=256, f = 256
  ASSERT_EQ(c.ffn_hidden(), 256);
  const MemoryEstimate e = estimate_single_rank_f32(c, 2, Recompute::Full);
  const int64_t h = 64, f = 256, l = 4, vp = 256;
  EXPECT_EQ(e.state_bytes, 16 * (l * (4 * h * h + 3 * h * f + 2 * h) + 2 * vp * h + h));
}

TEST(MemoryEstimate, TheLargestAllowedSizesAreRefusedWithAMessageInsteadOfOverflowing) {
  ModelConfig c;
  c.name = "custom";
  c.layers = kMaxLayers;
  c.hidden = kMaxHidden;
  c.heads = kMaxHeads;
  c.seq_length = kMaxSeqLength;
  c.vocab_size = kMaxVocabSize;
  c.make_vocab_size_divisible_by = kMaxVocabDivisibleBy;
  check_model_fields(c);  // within every bound
  for (Recompute mode : {Recompute::None, Recompute::Full, Recompute::Selective}) {
    try {
      (void)estimate_single_rank_f32(c, 1 << 20, mode);
      FAIL() << "no UsageError";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--model custom (l=65536 h=1048576 s=1048576) with --micro-batch 1048576 "
                                           "needs about "),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("more than the 4398 GB one replica may use"), std::string::npos) << e.what();
    }
  }
}

TEST(MemoryEstimate, AHiddenSizeOfOneBillionIsRefusedBeforeTheEstimate) {
  ModelConfig c = preset_config("tiny");
  c.hidden = 1'000'000'000;
  c.heads = 1;
  EXPECT_THROW(check_model_fields(c), UsageError);
  c.hidden = 1 << 19;  // allowed, but 12 h^2 l x 16 bytes is 825 TB
  EXPECT_THROW((void)estimate_single_rank_f32(c, 1, Recompute::Full), UsageError);
}

TEST(MemoryEstimate, JustBelowTheLimitIsAnEstimateNotAnError) {
  ModelConfig c = preset_config("gpt-145b");  // 145.6B parameters: 2.3 TB of state
  const MemoryEstimate e = estimate_single_rank_f32(c, 1, Recompute::Full);
  EXPECT_GT(e.state_bytes, int64_t(2'000'000'000'000));
  EXPECT_LE(e.total(), kMaxEstimateBytes);
}

}  // namespace
}  // namespace ptdp
