// notifier_test.cpp: the protocol that gets idle worker threads onto new work (notifier.hpp): a
// spinning thread is nudged, a sleeping one signalled, a wake is never spent twice, and what an
// idle thread's counters say matches what it is doing.
#include "scheduler/notifier.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace gf {
namespace {

// Polls `condition` under the mutex until it holds; the deadline only guards against a hang.
template <class Condition>
bool eventually(std::mutex &mu, Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      SchedulingLock lock(mu);
      if (condition()) return true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return false;
}

TEST(Notifier, ASpinningThreadIsNudgedOnce) {
  std::mutex mu;
  Notifier notifier(2);
  std::atomic<int> nudged{-1};
  std::thread spinner([&] {
    SchedulingLock lock(mu);
    nudged = notifier.spin(1, true, 1, lock) ? 1 : 0;
  });
  ASSERT_TRUE(eventually(mu, [&]() GF_REQUIRES(scheduling_lock) {
    return notifier.idle(1) == 1 || nudged.load() >= 0;
  }));
  {
    SchedulingLock lock(mu);
    if (nudged.load() < 0) {  // still spinning (a slow machine may have let the budget pass)
      EXPECT_EQ(notifier.unwoken(1), 1u);
      EXPECT_EQ(notifier.spinning_cpu_threads(), 1u);
      EXPECT_TRUE(notifier.wake_one(1));
      EXPECT_EQ(notifier.unwoken(1), 0u);  // the nudge is on its way: no second one
      EXPECT_FALSE(notifier.wake_one(1));
      EXPECT_FALSE(notifier.wake_one(0));  // nobody idles on worker 0
    }
  }
  spinner.join();
  SchedulingLock lock(mu);
  EXPECT_EQ(notifier.idle(1), 0u);
  EXPECT_EQ(notifier.unwoken_total(), 0u);
  EXPECT_EQ(notifier.spinning_cpu_threads(), 0u);
}

TEST(Notifier, SpinningEndsUnnudgedWhenNobodyWakesIt) {
  std::mutex mu;
  Notifier notifier(1);
  SchedulingLock lock(mu);
  EXPECT_FALSE(notifier.spin(0, false, 1, lock));
  EXPECT_TRUE(lock.owns_lock());
  EXPECT_EQ(notifier.idle(0), 0u);
  EXPECT_EQ(notifier.unwoken_total(), 0u);
}

TEST(Notifier, ASleepingThreadIsSignalledAndTheWakeIsSpentOnce) {
  std::mutex mu;
  Notifier notifier(1);
  std::atomic<bool> awake{false};
  std::atomic<bool> stop{false};
  std::thread sleeper([&] {
    SchedulingLock lock(mu);
    while (!stop.load()) notifier.sleep(0, true, lock);  // spurious wakes loop back
    awake = true;
  });
  ASSERT_TRUE(eventually(mu, [&]() GF_REQUIRES(scheduling_lock) { return notifier.idle(0) == 1; }));
  {
    SchedulingLock lock(mu);
    EXPECT_EQ(notifier.spinning_cpu_threads(), 0u);  // asleep: too slow to wake for a task
    stop = true;
    EXPECT_TRUE(notifier.wake_one(0));
    EXPECT_FALSE(notifier.wake_one(0));  // its wake is on its way
    EXPECT_EQ(notifier.unwoken_total(), 0u);
  }
  sleeper.join();
  EXPECT_TRUE(awake.load());
  SchedulingLock lock(mu);
  EXPECT_EQ(notifier.idle(0), 0u);
  EXPECT_EQ(notifier.unwoken_total(), 0u);
  EXPECT_EQ(notifier.spinning_cpu_threads(), 0u);
}

TEST(Notifier, WakeAllReachesSpinnersAndSleepers) {
  std::mutex mu;
  Notifier notifier(1);
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  auto idle_thread = [&](bool spin_first) {
    SchedulingLock lock(mu);
    while (!stop.load()) {
      if (spin_first) {
        spin_first = false;
        if (notifier.spin(0, true, 1, lock)) continue;
      }
      notifier.sleep(0, true, lock);
    }
    done++;
  };
  std::thread a(idle_thread, true), b(idle_thread, false);
  ASSERT_TRUE(eventually(mu, [&]() GF_REQUIRES(scheduling_lock) { return notifier.idle(0) == 2; }));
  {
    SchedulingLock lock(mu);
    stop = true;
    notifier.wake_all(0);
  }
  a.join();
  b.join();
  EXPECT_EQ(done.load(), 2);
}

}  // namespace
}  // namespace gf
