#include "core/common/median.h"

#include <gtest/gtest.h>

namespace ptdp {
namespace {

TEST(Median, OddAndEvenCountsInAnyOrder) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({7}), 7);
}

}  // namespace
}  // namespace ptdp
