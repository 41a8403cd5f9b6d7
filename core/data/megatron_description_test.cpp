// Megatron-core's description of a dataset and the cache names it gives, against the cache folder
// Megatron-core 0.16.1 wrote (core/data/testdata/megatron/cache/), and ptdp using that folder as
// it is: what a user with a Megatron-LM run's cache gets.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/data/megatron_description.h"
#include "core/data/megatron_samples.h"
#include "core/data/testing/data_test_util.h"
#include "core/data/testing/fixture_records.h"

namespace ptdp {
namespace {

namespace fs = std::filesystem;
using testing::FixtureRecords;
using testing::megatron_fixture_path;
using testing::file_bytes;
using testing::TempDir;

constexpr const char* kCacheHash = "3455469f59502104632f16b18b0a105c";

// single_separate's train split, as the fixture case built it.
MegatronGptIdentity separate_train_identity() {
  MegatronGptIdentity id;
  id.dataset_path = "mega_a";
  id.num_samples = 2007;
  id.seed = 1234;
  id.seq_len = 16;
  id.split_text = "949,50,1";
  id.split_weights = parse_megatron_split(id.split_text);
  return id;
}

// A working directory holding mega_a and a copy of Megatron's cache folder, entered for the test
// (the description names the dataset by the relative prefix Megatron was given).
class InMegatronRunDir {
 public:
  InMegatronRunDir() : home_(fs::current_path()) {
    for (const char* ext : {".bin", ".idx"}) fs::copy_file(megatron_fixture_path(std::string("mega_a") + ext), dir_.file(std::string("mega_a") + ext));
    fs::copy(megatron_fixture_path("cache"), dir_.file("cache"));
    fs::current_path(dir_.file(""));
  }
  ~InMegatronRunDir() { fs::current_path(home_); }
  std::vector<std::string> cache_entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator("cache")) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path home_;
  TempDir dir_;
};

MegatronDataOptions separate_train_options(const std::string& prefix) {
  MegatronDataOptions o;
  o.data = {prefix};
  o.split = "949,50,1";
  o.num_samples = 2007;
  o.seq_len = 16;
  o.seed = 1234;
  o.cache_dir = "cache";
  return o;
}

void expect_fixture_tokens(const MegatronSamples& samples) {
  const FixtureRecords f("megatron_single_separate.txt");
  std::vector<int32_t> out(17);
  for (int i = 0; i < 40; ++i) {
    samples.get(i, out.data());
    const auto expect = f.ints("train.tokens." + std::to_string(i));
    EXPECT_EQ(std::vector<int64_t>(out.begin(), out.end()), expect) << "sample " << i;
  }
}

TEST(MegatronDescription, Md5IsHashlibs) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("The quick brown fox jumps over the lazy dog"), "9e107d9d372bb6826bd81d3542a419d6");
}

TEST(MegatronDescription, EqualsTheTextMegatronWroteByteForByte) {
  const fs::path written = megatron_fixture_path(std::string("cache/") + kCacheHash + "-GPTDataset-train-description.txt");
  const std::string ours = megatron_gpt_description(separate_train_identity(), R"({"class": "FixtureTokenizer"})");
  EXPECT_EQ(ours, file_bytes(written));
  EXPECT_EQ(md5_hex(ours), kCacheHash);
}

TEST(MegatronDescription, PythonsJsonSpellingOfEdgeValues) {
  MegatronGptIdentity id = separate_train_identity();
  id.dataset_path = "d\u00e9j\u00e0 \"vu\"\\x";  // json.dumps escapes non-ASCII, quotes and backslashes
  id.num_samples = std::nullopt;
  id.split_text = "0,1";
  id.split_weights = parse_megatron_split(id.split_text);
  const std::string d = megatron_gpt_description(id);
  EXPECT_NE(d.find(R"("dataset_path": "d\u00e9j\u00e0 \"vu\"\\x",)"), std::string::npos) << d;
  EXPECT_NE(d.find("\"num_samples\": null,"), std::string::npos) << d;
  // "0,1": the train split is empty (None); the valid one starts at the float 0.0, not Python's int 0.
  EXPECT_NE(d.find("\"split_matrix\": [\n        null,\n        [\n            0.0,\n            1.0\n        ],\n        null\n    ],"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("\"tokenizer\": null\n}"), std::string::npos) << d;
}

TEST(MegatronDescription, SameIndicesIgnoresOnlyTheTokenizerAndTheSplitsSpelling) {
  const MegatronGptIdentity id = separate_train_identity();
  const std::string ours = megatron_gpt_description(id);
  EXPECT_TRUE(same_indices(megatron_gpt_description(id, R"({"class": "_GPT2BPETokenizer", "tokenizer_path": ["v", "m"]})"), ours));
  MegatronGptIdentity spaced = id;
  spaced.split_text = "949, 50, 1";
  EXPECT_TRUE(same_indices(megatron_gpt_description(spaced), ours));
  for (auto change : std::vector<void (*)(MegatronGptIdentity&)>{
           [](MegatronGptIdentity& x) { x.num_samples = 2008; }, [](MegatronGptIdentity& x) { x.seed = 1; },
           [](MegatronGptIdentity& x) { x.seq_len = 32; }, [](MegatronGptIdentity& x) { x.split = MegatronSplit::Valid; },
           [](MegatronGptIdentity& x) { x.dataset_path = "mega_b"; },
           [](MegatronGptIdentity& x) { x.split_weights = parse_megatron_split("948,51,1"); }}) {
    MegatronGptIdentity other = id;
    change(other);
    EXPECT_FALSE(same_indices(megatron_gpt_description(other), ours)) << megatron_gpt_description(other);
  }
  EXPECT_FALSE(same_indices("not json", ours));
  EXPECT_FALSE(same_indices("{}", ours));
}

TEST(MegatronDescription, MegatronsCacheIsUsedAsItIsWhateverItsTokenizer) {
  InMegatronRunDir run;
  const auto before = run.cache_entries();
  for (const std::string& prefix : {std::string("mega_a"), fs::absolute("mega_a").string()}) {
    SCOPED_TRACE(prefix);
    const MegatronSamples samples(separate_train_options(prefix));
    ASSERT_EQ(samples.datasets().size(), 1u);
    EXPECT_TRUE(samples.datasets()[0].index_files_found);
    EXPECT_EQ(samples.datasets()[0].index_files, std::string("cache/") + kCacheHash + "-GPTDataset-train");
    expect_fixture_tokens(samples);
    EXPECT_EQ(run.cache_entries(), before) << "nothing built";
  }
}

TEST(MegatronDescription, WhatPtdpBuildsCarriesMegatronsNameForItsDescription) {
  InMegatronRunDir run;
  MegatronDataOptions o = separate_train_options("mega_a");
  o.seed = 99;  // not in Megatron's cache
  const MegatronSamples samples(o);
  MegatronGptIdentity id = separate_train_identity();
  id.seed = 99;
  const std::string description = megatron_gpt_description(id);
  const std::string base = "cache/" + md5_hex(description) + "-GPTDataset-train";
  EXPECT_FALSE(samples.datasets()[0].index_files_found);
  EXPECT_EQ(samples.datasets()[0].index_files, base);
  EXPECT_EQ(file_bytes(base + "-description.txt"), description);
  const MegatronSamples again(o);
  EXPECT_TRUE(again.datasets()[0].index_files_found);
  EXPECT_EQ(again.datasets()[0].index_files, base);
}

TEST(MegatronDescription, IndexFilesThatNoLongerFitTheDatasetAreRebuilt) {
  InMegatronRunDir run;
  // A cached index whose sizes disagree with what the dataset gives (a dataset rewritten under
  // the same prefix): its description still matches, its files are not used.
  const std::string stale = std::string("cache/") + kCacheHash + "-GPTDataset-train";
  fs::copy_file(stale + "-shuffle_index.npy", stale + "-document_index.npy", fs::copy_options::overwrite_existing);
  const MegatronSamples samples(separate_train_options("mega_a"));
  EXPECT_FALSE(samples.datasets()[0].index_files_found);
  EXPECT_NE(samples.datasets()[0].index_files, stale);
  expect_fixture_tokens(samples);
}

}  // namespace
}  // namespace ptdp
