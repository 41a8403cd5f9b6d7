// `ptdp preprocess --tokenizer-model` end to end: a SentencePiece BPE model trained at test time
// with spm_train on GPL-3 (the real LLaMA tokenizer.model is not available here) tokenizes a
// dataset that `ptdp train --model llama-tiny --vocab-size 512` trains on; bad models and flags
// get one `ptdp: error:` line, exit code 2 and no output files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/data/indexed_dataset.h"
#include "core/data/sentencepiece_tokenizer.h"
#include "core/data/testing/spm_tokenizer_test_util.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

TEST(CliPreprocessTokenizer, ByteLevelSummaryNamesTheTokenizerAndVocabulary) {
  TempDir dir;
  testing::write_file(dir.file("in.txt"), {'h', 'e', 'l', 'l', 'o', '\n'});
  const CliResult r = run_ptdp(dir, {"preprocess", "--input", dir.file("in.txt"), "--output-prefix", dir.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 document(s), 6 tokens (byte-level tokenizer, vocabulary 256, uint16)"), std::string::npos)
      << r.out;
}

TEST(CliPreprocessTokenizer, AppendEodWithoutAModelIsRefused) {
  TempDir dir;
  testing::write_file(dir.file("in.txt"), {'h', 'i'});
  const CliResult r = run_ptdp(
      dir, {"preprocess", "--input", dir.file("in.txt"), "--output-prefix", dir.file("out"), "--append-eod"});
  EXPECT_TRUE(IsUsageError(r, {"--append-eod", "byte-level tokenizer has no end-of-document id", "--tokenizer-model"}));
  EXPECT_FALSE(fs::exists(dir.file("out.bin")));
  EXPECT_FALSE(fs::exists(dir.file("out.idx")));
}

TEST(CliPreprocessTokenizer, EmptyOrMissingModelNamesTheFlag) {
  TempDir dir;
  testing::write_file(dir.file("in.txt"), {'h', 'i'});
  const std::string in = dir.file("in.txt"), out = dir.file("out");
  CliResult r = run_ptdp(dir, {"preprocess", "--input", in, "--output-prefix", out, "--tokenizer-model", ""});
  EXPECT_TRUE(IsUsageError(r, {"--tokenizer-model", "must name a .model file"}));
  r = run_ptdp(dir, {"preprocess", "--input", in, "--output-prefix", out, "--tokenizer-model", dir.file("no.model")});
  if (sentencepiece_available())
    EXPECT_TRUE(IsUsageError(r, {"--tokenizer-model " + dir.file("no.model"), "No such file or directory"}));
  else
    EXPECT_TRUE(IsUsageError(r, {"--tokenizer-model " + dir.file("no.model"), "this build has no SentencePiece"}));
  EXPECT_FALSE(fs::exists(out + ".bin"));
  EXPECT_FALSE(fs::exists(out + ".idx"));
}

class CliSentencePiece : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::spm_unavailable(); !why.empty()) GTEST_SKIP() << why;
    model_ = testing::train_spm_model(dir_, "gpl3", false);
  }
  CliResult preprocess(const std::string& model, const std::string& prefix) {
    return run_ptdp(dir_, {"preprocess", "--input", testing::kGpl3, "--output-prefix", prefix, "--tokenizer-model",
                           model});
  }
  TempDir dir_;
  std::string model_;
};

// preprocess with the model, then train llama-tiny with a vocabulary that covers it: the run
// completes; a vocabulary that does not (the byte-level 256) is refused before training.
TEST_F(CliSentencePiece, PreprocessThenTrainLlamaTiny) {
  const std::string prefix = dir_.file("gpl3_spm");
  const CliResult pre = preprocess(model_, prefix);
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  EXPECT_NE(pre.out.find("(SentencePiece (gpl3.model) tokenizer, vocabulary 512, uint16)"), std::string::npos)
      << pre.out;
  const std::vector<int32_t> want = testing::spm_encode_ids(dir_, model_, testing::kGpl3);
  const auto ds = IndexedDataset::open(prefix);
  std::vector<int32_t> tokens(size_t(ds.total_tokens()));
  ds.read_tokens(0, ds.total_tokens(), tokens.data());
  EXPECT_EQ(tokens, want);

  const CliResult train = run_ptdp(dir_, {"train", "--model", "llama-tiny", "--vocab-size", "512", "--data", prefix,
                                          "--iters", "3", "--csv", dir_.file("r.csv")});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_TRUE(fs::exists(dir_.file("r.csv")));

  const CliResult small = run_ptdp(dir_, {"train", "--model", "llama-tiny", "--data", prefix, "--iters", "3"});
  EXPECT_TRUE(IsUsageError(small, {prefix + ".bin", "outside the vocabulary", "--vocab-size 256"}));
}

TEST_F(CliSentencePiece, AppendEodSaysSoInTheSummary) {
  const CliResult r = run_ptdp(dir_, {"preprocess", "--input", testing::kGpl3, "--output-prefix", dir_.file("o"),
                                      "--tokenizer-model", model_, "--append-eod"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("end-of-document id appended"), std::string::npos) << r.out;
}

TEST_F(CliSentencePiece, CorruptModelIsRefusedWithNoOutput) {
  const std::vector<uint8_t> good = testing::read_file(model_);
  const std::string truncated = dir_.file("truncated.model");
  testing::write_file(truncated, std::vector<uint8_t>(good.begin(), good.begin() + long(good.size() / 3)));
  const std::string text = dir_.file("text.model");
  testing::write_file(text, testing::read_file(testing::kGpl3));
  for (const std::string& bad : {truncated, text}) {
    const std::string prefix = dir_.file("out");
    const CliResult r = preprocess(bad, prefix);
    EXPECT_TRUE(IsUsageError(r, {"--tokenizer-model " + bad + ": not a SentencePiece model"}));
    EXPECT_FALSE(fs::exists(prefix + ".bin"));
    EXPECT_FALSE(fs::exists(prefix + ".idx"));
  }
  const CliResult dirmodel = preprocess(dir_.file(""), dir_.file("out"));
  EXPECT_TRUE(IsUsageError(dirmodel, {"--tokenizer-model", "not a regular file"}));
}

}  // namespace
}  // namespace ptdp
