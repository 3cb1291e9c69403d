#include "scheduler/notifier.hpp"

#include <sched.h>

#include <algorithm>

#include "core/spin_lock.hpp"

namespace gf {

bool Notifier::spin(uint32_t worker, bool cpu, int most_pauses, SchedulingLock &lock) {
  Idle &idle = idle_[worker];
  idle.spinning++;
  idle_total_++;
  if (cpu) spinning_cpu_threads_.fetch_add(1, std::memory_order_relaxed);
  const uint32_t seen = idle.nudges.load(std::memory_order_relaxed);
  bool nudged = false;
  // The thread that nudges it holds the mutex a while longer (it settles its batch and picks
  // its next): sleeping on the mutex after the spin would cost the wake-up the spin saved, and
  // while the holder keeps taking it back, a thread asleep on it may not get it for many of
  // the holder's batches.
  lock.released_while(
      [&] {
        const Clock::time_point start = Clock::now();
        for (uint32_t round = 1;; ++round) {
          if (idle.nudges.load(std::memory_order_acquire) != seen) {
            nudged = true;
            return;
          }
          cpu_relax();
          if (round % 64 != 0) continue;  // the clock costs tens of nanoseconds on a VM
          const double spun = seconds_between(start, Clock::now());
          if (spun > kSpinBudget) return;
          if (spun > kYieldAfter) sched_yield();
        }
      },
      most_pauses, kRelockSpins);
  nudged = nudged || idle.nudges.load(std::memory_order_relaxed) != seen;
  idle.spinning--;
  idle_total_--;
  if (cpu) spinning_cpu_threads_.fetch_sub(1, std::memory_order_relaxed);
  // A nudge meant for this thread (or for one that left before it) is used up.
  const uint32_t spent = std::min(idle.nudges_pending, nudged ? 1u : 0u);
  const uint32_t stale =
      idle.nudges_pending - spent > idle.spinning ? idle.nudges_pending - spent - idle.spinning : 0;
  idle.nudges_pending -= spent + stale;
  woken_total_ -= spent + stale;
  return nudged;
}

void Notifier::sleep(uint32_t worker, bool cpu, SchedulingLock &lock) {
  Idle &idle = idle_[worker];
  (void)cpu;
  idle.sleeping++;
  idle_total_++;
  idle.wake.wait(lock.native());
  if (idle.wakes_pending > 0) {  // woken, spuriously or not: one wake fewer is on its way
    idle.wakes_pending--;
    woken_total_--;
  }
  idle.sleeping--;
  idle_total_--;
}

bool Notifier::wake_one(uint32_t worker) {
  Idle &idle = idle_[worker];
  if (idle.spinning > idle.nudges_pending) {
    idle.nudges_pending++;
    woken_total_++;
    idle.nudges.fetch_add(1, std::memory_order_release);
    return true;
  }
  if (idle.sleeping > idle.wakes_pending) {
    idle.wakes_pending++;
    woken_total_++;
    idle.wake.notify_one();
    return true;
  }
  return false;
}

void Notifier::wake_all(uint32_t worker) {
  Idle &idle = idle_[worker];
  if (idle.spinning > 0) idle.nudges.fetch_add(1, std::memory_order_release);
  idle.wake.notify_all();
}

}  // namespace gf
