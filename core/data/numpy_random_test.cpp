#include "core/data/numpy_random.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "core/common/error.h"
#include "core/data/numpy_sum.h"
#include "core/data/testing/fixture_records.h"

namespace ptdp {
namespace {

using testing::FixtureRecords;

// The expected values come from real NumPy (scripts/megatron_fixtures.py numpy; the version is
// in the fixture's first line).
const FixtureRecords& numpy_fixture() {
  static const FixtureRecords r("numpy_random.txt");
  return r;
}

TEST(NumpyRandom, RawOutputEqualsRandomStateAcrossRegenerations) {
  for (uint64_t seed : {0ull, 1ull, 1234ull, 4294967295ull}) {
    const auto expect = numpy_fixture().uints("uint32.seed" + std::to_string(seed));
    ASSERT_EQ(expect.size(), 1300u);  // more than two 624-word state refills
    NumpyRandomState rs(seed);
    for (size_t i = 0; i < expect.size(); ++i) ASSERT_EQ(rs.next_uint32(), expect[i]) << "seed " << seed << " draw " << i;
  }
}

TEST(NumpyRandom, PermutationEqualsRandomStatePermutation) {
  for (uint64_t seed : {0, 1234, 7}) {
    for (int64_t n : {0, 1, 2, 3, 10, 17, 1000, 65537}) {
      const auto expect = numpy_fixture().ints("permutation.seed" + std::to_string(seed) + ".n" + std::to_string(n));
      auto got = NumpyRandomState(seed).permutation(n);
      if (n > 2000) {  // the fixture keeps the first and last 500
        std::vector<int64_t> ends(got.begin(), got.begin() + 500);
        ends.insert(ends.end(), got.end() - 500, got.end());
        got = ends;
      }
      EXPECT_EQ(got, expect) << "seed " << seed << " n " << n;
    }
  }
}

TEST(NumpyRandom, StateCarriesOverBetweenShufflesOfAnyItemType) {
  NumpyRandomState rs(1234);
  std::vector<int32_t> a(100);
  std::iota(a.begin(), a.end(), 0);
  rs.shuffle(std::span(a));
  std::vector<uint32_t> b(100);
  std::iota(b.begin(), b.end(), 37u);
  rs.shuffle(std::span(b));
  const auto ea = numpy_fixture().ints("shuffle_twice.seed1234.first");
  const auto eb = numpy_fixture().ints("shuffle_twice.seed1234.second");
  EXPECT_EQ(std::vector<int64_t>(a.begin(), a.end()), ea);
  EXPECT_EQ(std::vector<int64_t>(b.begin(), b.end()), eb);
}

TEST(NumpyRandom, SixtyFourBitDrawsTakeTheHighWordFirst) {
  for (uint64_t max : {4294967296ull, 1099511627775ull, 25769803780ull}) {
    const auto expect = numpy_fixture().uints("randint64.seed42.max" + std::to_string(max));
    NumpyRandomState rs(42);
    for (size_t i = 0; i < expect.size(); ++i) ASSERT_EQ(rs.interval(max), expect[i]) << "max " << max << " draw " << i;
  }
}

TEST(NumpyRandom, SeedOutsideNumpysRangeIsAUsageError) {
  EXPECT_THROW(NumpyRandomState(uint64_t{1} << 32, "--seed"), UsageError);
  try {
    NumpyRandomState(uint64_t{1} << 32, "--seed");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--seed 4294967296"), std::string::npos) << e.what();
  }
}

TEST(NumpySum, SumAndNormalizeEqualNumpyBitForBit) {
  int cases = 0;
  for (const auto& key : numpy_fixture().keys_with_prefix("sum.")) {
    cases += 1;
    if (key.size() < 3 || key.substr(key.size() - 3) != ".in") continue;
    const std::string stem = key.substr(4, key.size() - 7);  // "nK"
    const auto w = numpy_fixture().doubles(key);
    const double expect = numpy_fixture().doubles("sum." + stem + ".out").at(0);
    EXPECT_EQ(numpy_sum(w), expect) << stem;  // exact, not approximate
    EXPECT_EQ(numpy_normalize(w), numpy_fixture().doubles("normalize." + stem + ".out")) << stem;
  }
  EXPECT_EQ(cases, 2 * 26);  // "in" and "out" of 26 vectors, 1 to 300 items
}

}  // namespace
}  // namespace ptdp
