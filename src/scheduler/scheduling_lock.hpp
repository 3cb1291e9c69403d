// The scheduler's mutex as the compiler sees it. Scheduling state (the scheduler's own, its
// parts', each run's and each worker's) is GF_GUARDED_BY(scheduling_lock), and code that needs it
// held is GF_REQUIRES(scheduling_lock). scheduling_lock is one capability for every scheduler of
// the process: the compiler checks that code touching scheduling state holds a scheduler's mutex,
// and ownership makes it the right one (a run and its workers belong to one scheduler).
#pragma once

#include <mutex>

#include "core/spin_lock.hpp"
#include "core/thread_safety.hpp"

namespace gf {

class GF_CAPABILITY("mutex") SchedulingCapability {};
inline SchedulingCapability scheduling_lock;

// Holds a scheduler's mutex for a scope (unlock() and lock() within it, as std::unique_lock).
class GF_SCOPED_CAPABILITY SchedulingLock {
 public:
  explicit SchedulingLock(std::mutex &mutex) GF_ACQUIRE(scheduling_lock) : lock_(mutex) {}
  // Tries the mutex briefly before sleeping on it (core/spin_lock.hpp, at most `most_pauses`
  // between tries; 0: sleeps on it at once): worker threads of CPU workers, which take it every
  // few microseconds on graphs of tiny tasks.
  struct Spinning {
    int most_pauses;
  };
  SchedulingLock(std::mutex &mutex, Spinning spin) GF_ACQUIRE(scheduling_lock)
      : lock_(spin.most_pauses > 0 ? gf::lock_spinning(mutex, spin.most_pauses)
                                   : std::unique_lock<std::mutex>(mutex)) {}
  ~SchedulingLock() GF_RELEASE() {}
  SchedulingLock(const SchedulingLock &) = delete;
  SchedulingLock &operator=(const SchedulingLock &) = delete;

  void unlock() GF_RELEASE() { lock_.unlock(); }
  void lock() GF_ACQUIRE() { lock_.lock(); }
  bool owns_lock() const { return lock_.owns_lock(); }
  // Runs `wait` with the mutex released, and takes it again (trying `spins` pauses' worth,
  // spaced by up to `most_pauses`, before sleeping on it; core/spin_lock.hpp). The caller holds
  // the lock throughout as far as the analysis goes: `wait` must touch no guarded state.
  template <class Wait>
  void released_while(Wait &&wait, int most_pauses, int spins) GF_NO_THREAD_SAFETY_ANALYSIS {
    lock_.unlock();
    wait();
    lock_ = gf::lock_spinning(*lock_.mutex(), most_pauses, spins);
  }
  // For condition variables, which release and retake the mutex while they wait: the capability
  // counts as held throughout, as it is whenever the waiting code runs.
  std::unique_lock<std::mutex> &native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace gf
