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

TEST(FixedPoint, BytesConvertThroughOneFunction) {
  EXPECT_EQ(FixedPoint::from_bytes(0), FixedPoint{});
  EXPECT_EQ(FixedPoint::from_bytes(1 << 20).raw(), int64_t{1 << 20} * FixedPoint::kScale);
  EXPECT_TRUE(FixedPoint::bytes_representable(FixedPoint::kMaxBytes));
  EXPECT_FALSE(FixedPoint::bytes_representable(FixedPoint::kMaxBytes + 1));
  EXPECT_EQ(FixedPoint::from_bytes(FixedPoint::kMaxBytes).raw(), FixedPoint::kMaxRaw);
  // Beyond the maximum (refused at the ABI) the amount saturates just above any capacity.
  for (uint64_t huge : {FixedPoint::kMaxBytes + 1, uint64_t{1} << 63, UINT64_MAX}) {
    EXPECT_EQ(FixedPoint::from_bytes(huge).raw(), FixedPoint::kMaxRaw + 1) << huge;
  }
  // The largest amounts add up without overflow (request + outputs + in use, and more).
  FixedPoint sum;
  for (int i = 0; i < 9; ++i) sum += FixedPoint::from_bytes(FixedPoint::kMaxBytes);
  EXPECT_EQ(sum.raw(), 9 * FixedPoint::kMaxRaw);
}

TEST(FixedPoint, PositiveAmountsThatRoundToZeroAreFlagged) {
  EXPECT_TRUE(FixedPoint::rounds_to_zero(0.00001));
  EXPECT_TRUE(FixedPoint::rounds_to_zero(std::numeric_limits<double>::denorm_min()));
  EXPECT_FALSE(FixedPoint::rounds_to_zero(0));
  EXPECT_FALSE(FixedPoint::rounds_to_zero(0.0001));
  EXPECT_FALSE(FixedPoint::from_double(0.0001).is_zero());
}

}  // namespace gf
