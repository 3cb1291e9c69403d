// How much learnt work a batch of tiny tasks may hold, by the pool's CPU threads: small pools
// share one budget, it grows with the threads that take turns at the scheduler's mutex, and stops
// growing at 16. The figures themselves are tuned in bench/, not fixed here.
#include <gtest/gtest.h>

#include <cmath>

#include "scheduler/scheduler.hpp"

namespace gf {

TEST(BatchBudget, SmallPoolsShareOnePositiveBudget) {
  const double two = Scheduler::batch_budget_for(2);
  EXPECT_GT(two, 0.0);
  EXPECT_TRUE(std::isfinite(two));
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(0), two);  // a pool without CPU workers
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(1), two);
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(4), two);
}

TEST(BatchBudget, GrowsWithTheThreadsThenStops) {
  EXPECT_GT(Scheduler::batch_budget_for(8), Scheduler::batch_budget_for(4));
  EXPECT_GT(Scheduler::batch_budget_for(16), Scheduler::batch_budget_for(8));
  for (uint32_t threads = 1; threads < 256; ++threads) {
    EXPECT_LE(Scheduler::batch_budget_for(threads), Scheduler::batch_budget_for(threads + 1))
        << threads << " threads";
    if (threads >= 16) {
      EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(threads), Scheduler::batch_budget_for(16))
          << threads << " threads";
    }
  }
}

}  // namespace gf
