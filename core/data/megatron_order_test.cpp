// ptdp's Megatron sample order against fixtures made by Megatron-core's own code
// (scripts/megatron_fixtures.py megatron; megatron-core and numpy versions in each fixture's
// first line): the .bin/.idx files there were written by Megatron's IndexedDatasetBuilder.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "core/common/error.h"
#include "core/data/megatron_blend.h"
#include "core/data/megatron_description.h"
#include "core/data/megatron_gpt_indices.h"
#include "core/data/megatron_samples.h"
#include "core/data/megatron_split.h"
#include "core/data/numpy_sum.h"
#include "core/data/testing/data_test_util.h"
#include "core/data/testing/fixture_records.h"

namespace ptdp {
namespace {

using testing::FixtureRecords;
using testing::megatron_fixture_path;
using testing::TempDir;

std::vector<int64_t> all_of(const NpyArray& a) {
  std::vector<int64_t> out(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) out[i] = a.at(i);
  return out;
}

const char* numpy_name(NpyType t) {
  switch (t) {
    case NpyType::I16: return "int16";
    case NpyType::I32: return "int32";
    case NpyType::U32: return "uint32";
    case NpyType::I64: return "int64";
  }
  return "";
}

// The fixtures' tokenizer, as Megatron-core put it in each description.
constexpr const char* kFixtureTokenizer = R"({"class": "FixtureTokenizer"})";

MegatronGptIdentity fixture_identity(const FixtureRecords& f, const std::string& tag, MegatronSplit which,
                                     std::optional<int64_t> num_samples) {
  MegatronGptIdentity id;
  id.dataset_path = f.strings(tag + ".prefix").at(0);  // the relative prefix Megatron was given
  id.num_samples = num_samples;
  id.split = which;
  id.seed = static_cast<uint64_t>(f.scalar("seed"));
  id.seq_len = static_cast<int>(f.scalar("seq_len"));
  id.split_text = f.strings("split").at(0);
  id.split_weights = parse_megatron_split(id.split_text);
  return id;
}

constexpr std::array<MegatronSplit, 3> kSplits = {MegatronSplit::Train, MegatronSplit::Valid, MegatronSplit::Test};

// Builds every GPTDataset of a fixture case with ptdp and compares the three indices.
void expect_gpt_equal(const FixtureRecords& f, const std::string& tag, const std::array<double, 3>& split,
                      MegatronSplit which, std::optional<int64_t> num_samples, const TempDir& dir) {
  const std::string prefix = f.strings(tag + ".prefix").at(0);
  const auto ds = IndexedDataset::open(megatron_fixture_path(prefix));
  const auto range = megatron_split_range(split, which, ds.num_sequences());
  ASSERT_TRUE(range.has_value()) << tag;
  EXPECT_EQ((std::vector<int64_t>{range->begin, range->end}), f.ints(tag + ".indices")) << tag;
  if (num_samples) {
    EXPECT_EQ(*num_samples, f.scalar(tag + ".num_samples")) << tag;
  } else {
    EXPECT_EQ(f.strings(tag + ".num_samples").at(0), "None") << tag;
  }
  // Megatron's cache name for these indices: the MD5 of its description.
  const std::string description = megatron_gpt_description(fixture_identity(f, tag, which, num_samples), kFixtureTokenizer);
  EXPECT_EQ(md5_hex(description), f.strings(tag + ".description_md5").at(0)) << tag << "\n" << description;
  MegatronGptParams p;
  p.seq_len = static_cast<int>(f.scalar("seq_len"));
  p.seed = static_cast<uint64_t>(f.scalar("seed"));
  p.num_samples = num_samples;
  p.drop_last_partial_sequence = which != MegatronSplit::Valid || f.scalar("drop_last_partial_validation_sequence");
  const std::string base = dir.file(tag);
  const auto plan = build_megatron_gpt_indices(ds, *range, p, base, 4096);  // tiny budget: releases often
  const auto got = MegatronGptIndices::open(base);
  EXPECT_EQ(all_of(got.document_index()), f.ints(tag + ".document_index")) << tag;
  EXPECT_EQ(all_of(got.sample_index()), f.ints(tag + ".sample_index")) << tag;
  EXPECT_EQ(all_of(got.shuffle_index()), f.ints(tag + ".shuffle_index")) << tag;
  EXPECT_EQ(numpy_name(plan.sample_index_type), f.strings(tag + ".sample_index.dtype").at(0)) << tag;
  EXPECT_EQ(numpy_name(plan.shuffle_index_type), f.strings(tag + ".shuffle_index.dtype").at(0)) << tag;
}

void check_case(const std::string& name) {
  SCOPED_TRACE(name);
  const FixtureRecords f("megatron_" + name + ".txt");
  TempDir dir;
  const auto split = parse_megatron_split(f.strings("split").at(0));
  const auto sizes = f.ints("sizes");
  std::vector<std::string> blend_items = f.strings("blend");
  for (auto& item : blend_items)
    if (item.rfind("mega_", 0) == 0) item = megatron_fixture_path(item);
  const MegatronBlend blend = parse_megatron_blend(blend_items);
  const int seq_len = static_cast<int>(f.scalar("seq_len"));
  for (size_t s = 0; s < 3; ++s) {
    const std::string tag = megatron_split_name(kSplits[s]);
    if (f.scalar(tag + ".built") == 0) {
      const auto ds = IndexedDataset::open(blend.prefixes[0]);
      EXPECT_FALSE(megatron_split_range(split, kSplits[s], ds.num_sequences()).has_value()) << tag;
      continue;
    }
    if (blend.weights) {
      const auto plan = plan_megatron_blend(*blend.weights, sizes[s]);
      EXPECT_EQ(plan.weights, f.doubles(tag + ".blend.weights")) << tag;  // bit for bit
      EXPECT_EQ(plan.size, f.scalar(tag + ".blend.size")) << tag;
      for (size_t k = 0; k < blend.prefixes.size(); ++k)
        expect_gpt_equal(f, tag + ".gpt" + std::to_string(k), split, kSplits[s], plan.built_samples[k], dir);
      std::vector<MegatronGptIdentity> ids;
      for (size_t k = 0; k < blend.prefixes.size(); ++k)
        ids.push_back(fixture_identity(f, tag + ".gpt" + std::to_string(k), kSplits[s], plan.built_samples[k]));
      EXPECT_EQ(md5_hex(megatron_blend_description(ids, kSplits[s], plan.weights, plan.size, kFixtureTokenizer)),
                f.strings(tag + ".blend.description_md5").at(0))
          << tag;
      build_megatron_blending_indices(plan.weights, plan.size, dir.file(tag + "-blend"));
      EXPECT_EQ(all_of(NpyArray::open(dir.file(tag + "-blend-dataset_index.npy"))), f.ints(tag + ".blend.dataset_index"));
      EXPECT_EQ(all_of(NpyArray::open(dir.file(tag + "-blend-dataset_sample_index.npy"))),
                f.ints(tag + ".blend.dataset_sample_index"));
    } else if (blend.prefixes.size() > 1) {  // blended by the datasets' lengths, one epoch each
      std::vector<double> lengths;
      int64_t total = 0;
      for (size_t k = 0; k < blend.prefixes.size(); ++k) {
        const std::string t = tag + ".gpt" + std::to_string(k);
        expect_gpt_equal(f, t, split, kSplits[s], std::nullopt, dir);
        const int64_t n = static_cast<int64_t>(f.ints(t + ".shuffle_index").size());
        lengths.push_back(static_cast<double>(n));
        total += n;
      }
      const auto weights = numpy_normalize(lengths);
      EXPECT_EQ(weights, f.doubles(tag + ".blend.weights")) << tag;
      const int64_t size = std::min(sizes[s], total);
      EXPECT_EQ(size, f.scalar(tag + ".blend.size")) << tag;
      std::vector<MegatronGptIdentity> ids;
      for (size_t k = 0; k < blend.prefixes.size(); ++k)
        ids.push_back(fixture_identity(f, tag + ".gpt" + std::to_string(k), kSplits[s], std::nullopt));
      EXPECT_EQ(md5_hex(megatron_blend_description(ids, kSplits[s], weights, size, kFixtureTokenizer)),
                f.strings(tag + ".blend.description_md5").at(0))
          << tag;
      build_megatron_blending_indices(weights, size, dir.file(tag + "-blend"));
      EXPECT_EQ(all_of(NpyArray::open(dir.file(tag + "-blend-dataset_index.npy"))), f.ints(tag + ".blend.dataset_index"));
      EXPECT_EQ(all_of(NpyArray::open(dir.file(tag + "-blend-dataset_sample_index.npy"))),
                f.ints(tag + ".blend.dataset_sample_index"));
    } else {
      expect_gpt_equal(f, tag + ".gpt0", split, kSplits[s], sizes[s], dir);
    }
    // The tokens of the first samples, through the SampleSource the trainer uses.
    MegatronDataOptions o;
    o.data = blend_items;
    o.split = f.strings("split").at(0);
    o.which = kSplits[s];
    o.num_samples = sizes[s];
    o.seq_len = seq_len;
    o.seed = static_cast<uint64_t>(f.scalar("seed"));
    o.cache_dir = dir.file("cache");
    o.drop_last_partial_validation_sequence = f.scalar("drop_last_partial_validation_sequence") != 0;
    const MegatronSamples samples(o);
    std::vector<int32_t> out(seq_len + 1);
    int checked = 0, padded = 0;
    for (int64_t i = 0; f.has(tag + ".tokens." + std::to_string(i)); ++i, ++checked) {
      samples.get(i, out.data());
      auto expect = f.ints(tag + ".tokens." + std::to_string(i));
      for (auto& t : expect)
        if (t == -1) t = 0, padded += 1;  // Megatron's pad id, which its tokens and labels hold as 0
      EXPECT_EQ(std::vector<int64_t>(out.begin(), out.end()), expect) << tag << " sample " << i;
    }
    EXPECT_GT(checked, 0) << tag;
    if (kSplits[s] == MegatronSplit::Valid && f.scalar("drop_last_partial_validation_sequence") == 0) {
      EXPECT_GT(padded, 0) << "the fixture should reach the padded last sample";
    }
  }
}

TEST(MegatronOrder, OneDatasetWithASeparateFinalEpochEqualsMegatron) { check_case("single_separate"); }
TEST(MegatronOrder, OneDatasetWithTheFinalEpochJoinedEqualsMegatron) { check_case("single_joined"); }
TEST(MegatronOrder, LongSequencesAndAnEmptySplitEqualMegatron) { check_case("single_long"); }
TEST(MegatronOrder, ThreeWayBlendEqualsMegatron) { check_case("blend3"); }
TEST(MegatronOrder, UnnormalisedBlendNormalisedTwiceEqualsMegatron) { check_case("blend2"); }
TEST(MegatronOrder, BlendWithoutWeightsFollowsDatasetLengthsAsMegatron) { check_case("blend_by_size"); }
TEST(MegatronOrder, ValidSplitKeepingItsPartialLastSampleEqualsMegatron) { check_case("valid_partial"); }
TEST(MegatronOrder, SplitBookendsRoundHalfToEvenAsMegatron) { check_case("split_tie"); }

TEST(MegatronOrder, GetIsThreadSafeAndDeterministic) {
  TempDir dir;
  MegatronDataOptions o;
  o.data = {"0.3", megatron_fixture_path("mega_a"), "0.7", megatron_fixture_path("mega_b")};
  o.split = "949,50,1";
  o.num_samples = 3000;
  o.seq_len = 16;
  o.cache_dir = dir.file("cache");
  const MegatronSamples samples(o);
  ASSERT_GE(samples.num_samples(), 3000);
  std::vector<int32_t> serial(static_cast<size_t>(samples.num_samples()) * 17);
  for (int64_t i = 0; i < samples.num_samples(); ++i) samples.get(i, serial.data() + i * 17);
  std::vector<int32_t> parallel(serial.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = t; i < samples.num_samples(); i += 4) samples.get(i, parallel.data() + i * 17);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(serial, parallel);
  // Sources built at once on one empty cache (ranks as threads) agree with it.
  o.cache_dir = dir.file("cache2");
  std::vector<std::unique_ptr<MegatronSamples>> racing(3);
  std::vector<std::thread> builders;
  for (auto& r : racing) builders.emplace_back([&r, &o] { r = std::make_unique<MegatronSamples>(o); });
  for (auto& th : builders) th.join();
  std::vector<int32_t> row(17);
  for (const auto& r : racing)
    for (int64_t i : {int64_t{0}, int64_t{777}, samples.num_samples() - 1}) {
      r->get(i, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), serial.begin() + i * 17)) << i;
    }
  o.cache_dir = dir.file("cache");
  // A second source over the same cache reuses the files and gives the same samples.
  const MegatronSamples again(o);
  std::vector<int32_t> out(17);
  again.get(1234, out.data());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), serial.begin() + 1234 * 17));
  // The report: the weights, and the samples the blend takes from each dataset.
  ASSERT_EQ(samples.datasets().size(), 2u);
  EXPECT_EQ(samples.datasets()[0].samples_drawn + samples.datasets()[1].samples_drawn, samples.num_samples());
  EXPECT_GT(samples.datasets()[1].epochs_drawn, 1.0);
  try {
    samples.get(samples.num_samples(), out.data());
    ADD_FAILURE() << "read past the end";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("past the"), std::string::npos) << e.what();
  }
}

TEST(MegatronOrder, TheFixturesCoverBothFinalEpochBranches) {
  int separate = 0, joined = 0;
  for (const char* name : {"single_separate", "single_joined"}) {
    const FixtureRecords f(std::string("megatron_") + name + ".txt");
    const auto ds = IndexedDataset::open(megatron_fixture_path("mega_a"));
    const auto split = parse_megatron_split(f.strings("split").at(0));
    MegatronGptParams p;
    p.seq_len = static_cast<int>(f.scalar("seq_len"));
    p.num_samples = f.ints("sizes")[0];
    const auto plan = plan_megatron_gpt(ds, *megatron_split_range(split, MegatronSplit::Train, ds.num_sequences()), p);
    EXPECT_GT(plan.num_epochs, 1) << name;
    (plan.separate_final_epoch ? separate : joined) += 1;
  }
  EXPECT_EQ(separate, 1);
  EXPECT_EQ(joined, 1);
}

constexpr const char* kMegatronCache = "cache/3455469f59502104632f16b18b0a105c-GPTDataset-train";

TEST(MegatronOrder, WritesAndReadsMegatronsOwnCacheFilesByteForByte) {
  // cache/: Megatron's numpy.save output for single_separate's train split.
  const FixtureRecords f("megatron_single_separate.txt");
  TempDir dir;
  const auto ds = IndexedDataset::open(megatron_fixture_path("mega_a"));
  MegatronGptParams p;
  p.seq_len = 16;
  p.seed = 1234;
  p.num_samples = 2007;
  const auto split = parse_megatron_split("949,50,1");
  build_megatron_gpt_indices(ds, *megatron_split_range(split, MegatronSplit::Train, ds.num_sequences()), p,
                             dir.file("x"));
  for (const char* which : {"document_index", "sample_index", "shuffle_index"}) {
    const std::string megatron = megatron_fixture_path(std::string(kMegatronCache) + "-" + which + ".npy");
    EXPECT_EQ(testing::file_bytes(dir.file(std::string("x-") + which + ".npy")), testing::file_bytes(megatron)) << which;
  }
  const auto read = MegatronGptIndices::open(megatron_fixture_path(kMegatronCache));
  EXPECT_EQ(all_of(read.shuffle_index()), f.ints("train.gpt0.shuffle_index"));
}

TEST(MegatronOrder, BadSplitStringsAreUsageErrorsNamingTheRule) {
  for (const char* bad : {"", "949,,1", "1,2,3,4", "a,b", "-1,2", "0,0,0", "9 49"}) {
    try {
      parse_megatron_split(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--split '" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
  const auto s = parse_megatron_split("949/50/1");
  EXPECT_DOUBLE_EQ(s[0], 0.949);
  EXPECT_EQ(parse_megatron_split("969, 30, 1"), parse_megatron_split("969,30,1"));  // Megatron's default
  const auto two = parse_megatron_split("9,1");
  EXPECT_EQ(two[2], 0.0);
}

TEST(MegatronOrder, BadWeightListsAreUsageErrors) {
  const auto message = [](std::vector<std::string> items) -> std::string {
    try {
      parse_megatron_blend(items);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(message({"-0.5", "a", "1", "b"}).find("weight '-0.5' of a: weights must be positive"), std::string::npos);
  EXPECT_NE(message({"0", "a", "1", "b"}).find("weights must be positive"), std::string::npos);
  EXPECT_NE(message({"0.3", "a", "b"}).find("'0.3' looks like a weight"), std::string::npos);
  EXPECT_NE(message({"0.3x", "a", "0.7", "b"}).find("'0.7' looks like a weight"), std::string::npos);
  EXPECT_NE(message({}).find("--data: needs a dataset prefix"), std::string::npos);
  EXPECT_NE(message({"0.5", "1", "0.5", "b"}).find("is a number, not a dataset prefix"), std::string::npos);
  const auto ok = parse_megatron_blend(std::vector<std::string>{"2", "a", "1e0", "b"});
  EXPECT_EQ(ok.prefixes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*ok.weights, (std::vector<double>{2.0, 1.0}));
}

}  // namespace
}  // namespace ptdp
