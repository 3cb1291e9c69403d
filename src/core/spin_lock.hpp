// Taking a mutex that is mostly held for a few microseconds: try it for about as long as it is
// usually held before sleeping on it. A thread that sleeps on a contended std::mutex pays two
// system calls, its own futex wait and the holder's wake, which on graphs of tiny tasks would be
// much of the workers' time. Bounded, so a holder that is
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

// About 1 to 15 µs: PAUSE takes 10 to 140 cycles (or tens of nanoseconds on a VM), depending on
// the processor.
inline constexpr int kLockSpins = 300;

// Between tries the pauses double, up to `most_pauses`: every try writes the mutex's cache line,
// and many threads trying back to back take it from the holder over and over. With one other
// thread waiting at most, a pause or two lets the mutex change hands soonest.
template <class Mutex>
std::unique_lock<Mutex> lock_spinning(Mutex &mutex, int most_pauses = 1, int spins = kLockSpins) {
  std::unique_lock<Mutex> lock(mutex, std::try_to_lock);
  for (int spun = 0, pauses = 1; spun < spins && !lock.owns_lock(); spun += pauses) {
    for (int p = 0; p < pauses; ++p) cpu_relax();
    (void)lock.try_lock();
    if (pauses < most_pauses) pauses *= 2;
  }
  if (!lock.owns_lock()) lock.lock();
  return lock;
}

}  // namespace gf
