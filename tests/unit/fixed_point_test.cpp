#include "core/fixed_point.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace gf {

TEST(FixedPoint, HalvesAddUpExactly) {
  FixedPoint half = FixedPoint::from_double(0.5);
  EXPECT_EQ(half + half, FixedPoint::from_double(1.0));
  FixedPoint tenth = FixedPoint::from_double(0.1);
  FixedPoint sum;
  for (int i = 0; i < 10; ++i) sum += tenth;
  EXPECT_EQ(sum, FixedPoint::from_double(1.0));  // 0.1 * 10 drifts in floating point
}

TEST(FixedPoint, RejectsWhatCannotBeRepresented) {
  EXPECT_FALSE(FixedPoint::representable(-1));
  EXPECT_FALSE(FixedPoint::representable(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(FixedPoint::representable(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(FixedPoint::representable(1e15));
  EXPECT_TRUE(FixedPoint::representable(0));
  EXPECT_TRUE(FixedPoint::representable(80e9));  // 80 GB of gpu_memory
}

TEST(FixedPoint, RoundTripsThroughDouble) {
  EXPECT_DOUBLE_EQ(FixedPoint::from_double(0.25).to_double(), 0.25);
  EXPECT_DOUBLE_EQ(FixedPoint::from_double(17179869184.0).to_double(), 17179869184.0);
}

}  // namespace gf
