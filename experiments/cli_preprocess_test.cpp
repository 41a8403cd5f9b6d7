// `ptdp preprocess` with tokenizers end to end: a SentencePiece BPE model trained at test time
// with spm_train on GPL-3 (the real LLaMA tokenizer.model is not available here) tokenizes a
// dataset that `ptdp train --model llama-tiny --vocab-size 512` trains on; GPT-2's BPE
// (--tokenizer-type GPT2BPETokenizer) with a small vocabulary in GPT-2's format gives the ids of
// transformers' GPT2Tokenizer (core/data/testdata/gpt2_bpe/); bad models and flags get one
// `ptdp: error:` line, exit code 2 and no output files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/data/indexed_dataset.h"
#include "core/data/sentencepiece_tokenizer.h"
#include "core/data/testing/gpt2_bpe_fixtures.h"
#include "core/data/token_dtype.h"
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
  EXPECT_TRUE(IsUsageError(r, {"--append-eod", "byte-level tokenizer has no end-of-document id", "--tokenizer-model",
                               "--tokenizer-type GPT2BPETokenizer"}));
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

// The paper's tokenizer: the dataset holds transformers' ids of the whole file and then
// <|endoftext|>'s, with the dtype Megatron picks for the vocabulary (uint16 for 1800 ids).
TEST(CliPreprocessGpt2Bpe, TokensAreTransformersIdsThenEndOfText) {
  if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const testing::Gpt2Fixtures fx = testing::read_gpt2_fixtures();
  TempDir dir;
  const std::string prefix = dir.file("gpt2");
  const CliResult r = run_ptdp(dir, {"preprocess", "--input", testing::gpt2_fixture("text.txt"), "--output-prefix",
                                     prefix, "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file",
                                     testing::gpt2_fixture("vocab.json"), "--merge-file",
                                     testing::gpt2_fixture("merges.txt"), "--append-eod"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(GPT-2 BPE (vocab.json, merges.txt) tokenizer, vocabulary 1800, uint16, end-of-document id "
                       "appended)"),
            std::string::npos)
      << r.out;
  const auto ds = IndexedDataset::open(prefix);
  EXPECT_EQ(ds.dtype(), token_dtype_for_vocab(fx.vocab_size));
  EXPECT_EQ(ds.dtype(), TokenDType::U16);
  EXPECT_EQ(ds.num_documents(), 1);
  std::vector<int32_t> tokens(size_t(ds.total_tokens()));
  ds.read_tokens(0, ds.total_tokens(), tokens.data());
  std::vector<int32_t> want = fx.document_ids;
  want.push_back(fx.eod);
  EXPECT_EQ(tokens, want);
}

// Megatron's flags go together: each GPT-2 file flag with its type, the type with both files,
// known type names only; refused before anything is written, whatever the build.
TEST(CliPreprocessGpt2Bpe, FlagsThatDoNotGoTogetherAreRefusedWithNoOutput) {
  TempDir dir;
  testing::write_file(dir.file("in.txt"), {'h', 'i'});
  const std::string vocab = testing::gpt2_fixture("vocab.json"), merges = testing::gpt2_fixture("merges.txt");
  const std::vector<std::string> base = {"preprocess", "--input", dir.file("in.txt"), "--output-prefix",
                                         dir.file("out")};
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_ptdp(dir, args);
  };
  EXPECT_TRUE(IsUsageError(run({"--vocab-file", vocab, "--merge-file", merges}),
                           {"--vocab-file is for --tokenizer-type GPT2BPETokenizer"}));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab}),
                           {"--tokenizer-type GPT2BPETokenizer needs --merge-file"}));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", "GPT2BPETokenizer", "--merge-file", merges}),
                           {"--tokenizer-type GPT2BPETokenizer needs --vocab-file"}));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab, "--merge-file", merges,
                                "--tokenizer-model", dir.file("m.model")}),
                           {"--tokenizer-model is for SentencePiece models"}));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", "HuggingFaceTokenizer"}),
                           {"--tokenizer-type HuggingFaceTokenizer: unknown (known: GPT2BPETokenizer, "
                            "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer)"}));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", "Llama2Tokenizer"}),
                           {"--tokenizer-type Llama2Tokenizer needs --tokenizer-model"}));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "", "--merge-file", merges}),
                           {"--vocab-file", "must name a vocab.json file"}));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", ""}), {"--tokenizer-type", "must name a tokenizer type"}));
  const CliResult built = run({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab, "--merge-file", merges});
  if (gpt2_bpe_available()) {
    EXPECT_EQ(built.exit_code, 0) << built.err;
  } else {
    EXPECT_TRUE(IsUsageError(built, {"--tokenizer-type GPT2BPETokenizer: this build has no PCRE2 (libpcre2-dev)"}));
    EXPECT_FALSE(fs::exists(dir.file("out.bin")));
  }
  fs::remove(dir.file("out.bin"));
  fs::remove(dir.file("out.idx"));
  EXPECT_TRUE(IsUsageError(run({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", merges, "--merge-file", vocab}),
                           {gpt2_bpe_available() ? "--vocab-file " + merges + ": not JSON" : "no PCRE2"}));
  EXPECT_FALSE(fs::exists(dir.file("out.bin")));
  EXPECT_FALSE(fs::exists(dir.file("out.idx")));
}

}  // namespace
}  // namespace ptdp
