#include "scheduler/ledger.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace gf {
namespace {

FixedPoint fp(double v) {
  return FixedPoint::from_double(v);
}

constexpr ResourceId kGpu = 0, kMem = 1, kLabel = 2;

Ledger gpu_worker() {
  Ledger l;
  l.advertise(kGpu, fp(1));
  l.advertise(kMem, fp(1000));
  return l;
}

}  // namespace

TEST(Ledger, FractionalRequestsShareCapacityExactly) {
  Ledger l = gpu_worker();
  PoolRequest half{{kGpu, fp(0.5)}};
  ASSERT_TRUE(l.fits_now(half));
  l.acquire(half);
  ASSERT_TRUE(l.fits_now(half));
  l.acquire(half);
  EXPECT_FALSE(l.fits_now(half));
  EXPECT_FALSE(l.fits_now({{kGpu, fp(0.0001)}}));
  l.release(half);
  l.release(half);
  EXPECT_TRUE(l.idle());
  EXPECT_EQ(l.lines()[0].peak, fp(1));
}

TEST(Ledger, UnknownResourceNeverFits) {
  Ledger l = gpu_worker();
  EXPECT_FALSE(l.could_fit({{kLabel, fp(1)}}));
  EXPECT_FALSE(l.fits_now({{kLabel, fp(1)}}));
}

TEST(Ledger, CouldFitIgnoresWhatIsInUse) {
  Ledger l = gpu_worker();
  l.acquire({{kGpu, fp(1)}});
  EXPECT_TRUE(l.could_fit({{kGpu, fp(1)}}));
  EXPECT_FALSE(l.fits_now({{kGpu, fp(1)}}));
  EXPECT_FALSE(l.could_fit({{kGpu, fp(2)}}));
}

TEST(Ledger, ExtraMemoryCountsWithTheRequest) {
  Ledger l = gpu_worker();
  PoolRequest scratch{{kMem, fp(600)}};
  EXPECT_TRUE(l.fits_now(scratch, fp(400), kMem));
  EXPECT_FALSE(l.fits_now(scratch, fp(401), kMem));
  // Outputs alone, without a gpu_memory request, are still checked against memory.
  EXPECT_FALSE(l.fits_now({}, fp(1001), kMem));
  EXPECT_TRUE(l.try_charge(kMem, fp(1000)));
  EXPECT_FALSE(l.try_charge(kMem, fp(1)));
  l.discharge(kMem, fp(1000));
  EXPECT_TRUE(l.idle());
}

TEST(Ledger, OverCommitAndOverReleaseAreCaught) {
  Ledger l = gpu_worker();
  l.acquire({{kGpu, fp(1)}});
  EXPECT_THROW(l.acquire({{kGpu, fp(1)}}), Error);
  l.release({{kGpu, fp(1)}});
  EXPECT_THROW(l.release({{kGpu, fp(1)}}), Error);
}

}  // namespace gf
