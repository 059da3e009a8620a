// core/stats.h: the two medians and what each gives for odd, even and empty samples.
#include "core/stats.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

TEST(Stats, UpperMedianIsAlwaysAMeasuredValue) {
  EXPECT_EQ(upper_median({}), 0.0);
  EXPECT_EQ(upper_median({4.0}), 4.0);
  EXPECT_EQ(upper_median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(upper_median({0.5, 3.0}), 3.0);  // the upper of the two middle ones
  EXPECT_EQ(upper_median({4.0, 1.0, 3.0, 2.0}), 3.0);
}

TEST(Stats, MedianTakesTheMeanOfTheTwoMiddleOnes) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({4.0}), 4.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({0.5, 3.0}), 1.75);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

}  // namespace
}  // namespace ferry
