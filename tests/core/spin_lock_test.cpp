// spin_lock_test.cpp: lock_spinning, how the scheduler's CPU threads take its mutex. What they
// rely on: it excludes as the mutex does, whatever the pauses between tries, with more threads
// than cores; a mutex let go while a thread spins on it is taken by the spinning, not asleep; and
// a thread whose holder keeps the mutex past the spinning still gets it, asleep. Each contention
// is made, not hoped for: the mutex below tells the test how lock_spinning is taking it.
#include "core/spin_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace {

// A std::mutex that counts how it is taken: tries refused, and calls of lock() (the spinning gave
// up and the thread sleeps on it). `on_refused`, when set, runs in the refused thread, with the
// count so far, before its try returns.
struct WatchedMutex {
  std::mutex inner;  // the holder in a test takes this one, so that only lock_spinning is counted
  std::atomic<int> refused{0};
  std::atomic<int> sleeping{0};
  std::function<void(int)> on_refused;

  void lock() {
    sleeping.fetch_add(1);
    inner.lock();
  }
  bool try_lock() {
    if (inner.try_lock()) return true;
    const int n = refused.fetch_add(1) + 1;
    if (on_refused) on_refused(n);
    return false;
  }
  void unlock() { inner.unlock(); }
};

// Waits for `done`; false after 10 s, a guard against a hang (what is waited for takes
// microseconds).
template <class Pred>
bool eventually(Pred done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

// Threads adding to a plain counter under the lock: any overlap loses increments (and
// ThreadSanitizer names the race). They start against a held mutex, which is let go only once
// every one of them has been refused: all of them contend from the first increment on.
uint64_t count_under_lock(int threads, int most_pauses, int each) {
  WatchedMutex mutex;
  std::atomic<int> contending{0};
  mutex.on_refused = [&](int) {
    thread_local bool counted = false;  // each thread is new: counted once, at its first refusal
    if (!counted) {
      counted = true;
      contending.fetch_add(1);
    }
  };
  uint64_t counter = 0;
  std::unique_lock<std::mutex> held(mutex.inner);
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
  EXPECT_TRUE(eventually([&] { return contending.load() == threads; }))
      << contending.load() << " of " << threads << " threads were refused the held mutex";
  held.unlock();
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

TEST(SpinLock, AMutexLetGoWhileAThreadSpinsIsTakenWithoutSleeping) {
  WatchedMutex mutex;
  std::unique_lock<std::mutex> held(mutex.inner);
  std::atomic<bool> asked{false}, let_go{false}, got{false};
  // At its third refusal the spinning thread waits, inside its try, until the holder has let go:
  // its next try comes after the release, and before its spinning is over.
  mutex.on_refused = [&](int n) {
    if (n != 3) return;
    asked = true;
    EXPECT_TRUE(eventually([&] { return let_go.load(); }));
  };
  std::thread waiter([&] {
    auto lock = gf::lock_spinning(mutex, 2);
    got = lock.owns_lock();
  });
  EXPECT_TRUE(eventually([&] { return asked.load(); })) << "refused " << mutex.refused.load();
  EXPECT_FALSE(got.load());
  held.unlock();
  let_go = true;
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(mutex.refused.load(), 3) << "the try after the release took it";
  EXPECT_EQ(mutex.sleeping.load(), 0) << "it slept on a mutex that was let go while it spun";
}

TEST(SpinLock, AHolderPastTheSpinningStillHandsItOver) {
  WatchedMutex mutex;
  std::atomic<bool> got{false};
  std::unique_lock<std::mutex> held(mutex.inner);
  std::thread waiter([&] {
    auto lock = gf::lock_spinning(mutex, 8);
    got = lock.owns_lock();
  });
  // Held until the waiter has spun out its tries and gone to lock(), where it sleeps.
  EXPECT_TRUE(eventually([&] { return mutex.sleeping.load() == 1; }))
      << "refused " << mutex.refused.load() << ", still spinning";
  EXPECT_GE(mutex.refused.load(), 2) << "it went to sleep without spinning";
  EXPECT_LE(mutex.refused.load(), gf::kLockSpins + 1) << "a try per pause at most, and the first";
  EXPECT_FALSE(got.load());
  held.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(mutex.sleeping.load(), 1);
}

}  // namespace
