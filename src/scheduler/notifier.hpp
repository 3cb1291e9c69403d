// Worker threads with nothing to do, and how work reaches them.
//
// The protocol. A thread that finds nothing to pick or steal first *spins*: it counts itself
// spinning, releases the scheduler's mutex and watches its worker's nudge counter (an atomic on
// its own cache line) for up to kSpinBudget, pausing and, after a while, yielding the core. Then
// it retakes the mutex and looks again; if it was not nudged and still finds nothing, it *sleeps*
// on its worker's condition variable. A thread that makes work for a worker (queues a task,
// frees resources, grants a device) calls wake_one() under the mutex: it nudges a spinning thread
// of that worker if one is not nudged yet (a store, no system call), else signals a sleeping one
// that has no wake on its way. Every look for work happens under the mutex, after the count of
// spinning or sleeping threads was raised under it, so a wake is never lost: either the waker saw
// the count and nudged or signalled, or the thread saw the work.
//
// Why spin: on the VMs the pool runs on, a sleeping thread takes 25-40 µs to run again after it
// is signalled, which on a narrow graph (two tasks a step) serialises the steps. OpenMP's and
// StarPU's workers spin too. Only CPU workers spin: a device worker's tasks are long, and its
// spinning took the CPU from the threads it waited on when a pool shared two cores with its
// service.
//
// spinning_cpu_threads() is read without the mutex by worker threads deciding whether to run a
// successor themselves (direct_run.cpp): while a CPU thread spins, successors are left to it (a
// sleeping one would take longer to wake than the task takes). A nudge brings back every spinner
// of its worker (most workers have one thread); the wake of a sleeper, one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/clock.hpp"
#include "core/spin_lock.hpp"
#include "scheduler/scheduling_lock.hpp"

namespace gf {

class Notifier {
 public:
  // How long a thread spins before it sleeps, and after how long it starts yielding its core to
  // other runnable threads between looks.
  static constexpr double kSpinBudget = 300e-6;
  static constexpr double kYieldAfter = 20e-6;
  // Pauses a spinning thread tries the mutex for, once it stops spinning, before sleeping on it
  // (about 30-400 µs; core/spin_lock.hpp).
  static constexpr int kRelockSpins = 20 * kLockSpins;

  explicit Notifier(size_t workers) : idle_(workers) {}

  // A thread of `worker` (whose threads may spin when `may_spin`) has found nothing to do: spins
  // (with the mutex released) until nudged or kSpinBudget passes. Returns whether it was nudged.
  // `most_pauses` spaces its tries of the mutex when it stops spinning (core/spin_lock.hpp).
  bool spin(uint32_t worker, bool cpu, int most_pauses, SchedulingLock &lock)
      GF_REQUIRES(scheduling_lock);
  // Sleeps until signalled (or spuriously woken).
  void sleep(uint32_t worker, bool cpu, SchedulingLock &lock) GF_REQUIRES(scheduling_lock);

  // Gets one idle thread of `worker` looking for work: nudges a spinner, else signals a sleeper,
  // unless every idle thread of it has a wake on its way. Returns whether it woke one.
  bool wake_one(uint32_t worker) GF_REQUIRES(scheduling_lock);
  // Every thread of `worker` looks again (a grant, a shutdown, a pool gone quiet).
  void wake_all(uint32_t worker) GF_REQUIRES(scheduling_lock);

  // Threads of `worker` spinning or asleep, and of those, the ones without a wake on their way.
  uint32_t idle(uint32_t worker) const GF_REQUIRES(scheduling_lock) {
    return idle_[worker].spinning + idle_[worker].sleeping;
  }
  uint32_t unwoken(uint32_t worker) const GF_REQUIRES(scheduling_lock) {
    const Idle &i = idle_[worker];
    return i.spinning - i.nudges_pending + i.sleeping - i.wakes_pending;
  }
  uint64_t idle_total() const GF_REQUIRES(scheduling_lock) { return idle_total_; }
  uint64_t unwoken_total() const GF_REQUIRES(scheduling_lock) { return idle_total_ - woken_total_; }
  // CPU threads spinning, read without the mutex: a hint.
  uint32_t spinning_cpu_threads() const {
    return spinning_cpu_threads_.load(std::memory_order_relaxed);
  }

  // The worker whose thread is settling a batch right now: it picks again right after, so work
  // it makes ready for itself needs no other thread (Scheduler::wake_for).
  uint32_t completing_worker GF_GUARDED_BY(scheduling_lock) = UINT32_MAX;

 private:
  struct alignas(64) Idle {
    uint32_t spinning = 0, nudges_pending = 0;  // spinning, and nudged but not back yet
    uint32_t sleeping = 0, wakes_pending = 0;   // asleep, and signalled but not back yet
    std::condition_variable wake;
    // Bumped by each nudge; spinners watch it. On its own line: the spinners read it in a loop.
    alignas(64) std::atomic<uint32_t> nudges{0};
  };

  std::vector<Idle> idle_ GF_GUARDED_BY(scheduling_lock);
  uint64_t idle_total_ GF_GUARDED_BY(scheduling_lock) = 0;   // spinning + sleeping, all workers
  uint64_t woken_total_ GF_GUARDED_BY(scheduling_lock) = 0;  // nudges + wakes pending, all
  alignas(64) std::atomic<uint32_t> spinning_cpu_threads_{0};
};

}  // namespace gf
