// How much learnt work a batch of tiny tasks may hold, by the pool's CPU threads (issue 29): the
// budget measured best on 2 threads stays for small pools, grows with the threads that take
// turns at the scheduler's mutex, and stops growing at 16.
#include <gtest/gtest.h>

#include "scheduler/scheduler.hpp"

namespace gf {

TEST(BatchBudget, SmallPoolsKeepTheBudgetMeasuredOnTwoThreads) {
  const double two = Scheduler::batch_budget_for(2);
  EXPECT_DOUBLE_EQ(two, 20e-6);
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(0), two);  // a pool without CPU workers
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(1), two);
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(4), two);
}

TEST(BatchBudget, GrowsWithTheThreadsUpToFourTimes) {
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(8), 2 * Scheduler::batch_budget_for(2));
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(16), 4 * Scheduler::batch_budget_for(2));
  EXPECT_DOUBLE_EQ(Scheduler::batch_budget_for(128), Scheduler::batch_budget_for(16));
  for (uint32_t threads = 1; threads < 256; ++threads) {
    EXPECT_LE(Scheduler::batch_budget_for(threads), Scheduler::batch_budget_for(threads + 1))
        << threads << " threads";
  }
}

}  // namespace gf
