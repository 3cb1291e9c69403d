// spin_lock_test.cpp: lock_spinning, how the scheduler's CPU threads take its mutex. What they
// rely on: it excludes as the mutex does, whatever the pauses between tries, with more threads
// than cores; and a thread whose holder keeps the mutex past the spinning still gets it, asleep.
#include "core/spin_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace {

// Threads adding to a plain counter under the lock: any overlap loses increments (and
// ThreadSanitizer names the race).
uint64_t count_under_lock(int threads, int most_pauses, int each) {
  std::mutex mutex;
  uint64_t counter = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < each; ++i) {
        auto lock = gf::lock_spinning(mutex, most_pauses);
        ASSERT_TRUE(lock.owns_lock());
        counter = counter + 1;
      }
    });
  }
  for (auto &thread : pool) thread.join();
  return counter;
}

TEST(SpinLock, ExcludesWithEveryPauseBound) {
  const int threads = static_cast<int>(std::thread::hardware_concurrency()) * 2 + 2;
  for (int most_pauses : {1, 2, 8, 64}) {
    EXPECT_EQ(count_under_lock(threads, most_pauses, 5000), uint64_t(threads) * 5000)
        << "most_pauses " << most_pauses;
  }
}

TEST(SpinLock, AHolderPastTheSpinningStillHandsItOver) {
  std::mutex mutex;
  std::atomic<bool> got{false};
  std::unique_lock<std::mutex> held(mutex);
  std::thread waiter([&] {
    auto lock = gf::lock_spinning(mutex, 8);
    got = lock.owns_lock();
  });
  // Far past kLockSpins pauses (microseconds): the waiter sleeps on the mutex by now.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  held.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
}

}  // namespace
