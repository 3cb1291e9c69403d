// Taking a mutex that is mostly held for a few microseconds: try it for about as long as it is
// usually held before sleeping on it. A thread that sleeps on a contended std::mutex pays two
// system calls, its own futex wait and the holder's wake; profiled on a no-op tree with two
// workers, those were a fifth of the workers' time (issue 29). Bounded, so a holder that is
// descheduled (more threads than cores) costs a spinner only a few microseconds.
#pragma once

#include <mutex>

namespace gf {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// About 1 to 15 µs: PAUSE takes 10 to 140 cycles, depending on the processor.
inline constexpr int kLockSpins = 300;

template <class Mutex>
std::unique_lock<Mutex> lock_spinning(Mutex &mutex) {
  std::unique_lock<Mutex> lock(mutex, std::try_to_lock);
  for (int spin = 0; spin < kLockSpins && !lock.owns_lock(); ++spin) {
    cpu_relax();
    (void)lock.try_lock();
  }
  if (!lock.owns_lock()) lock.lock();
  return lock;
}

}  // namespace gf
