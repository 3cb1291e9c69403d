// The runtime's notion of time, in one place so that tests and estimates agree on it.
#pragma once

#include <chrono>

namespace gf {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace gf
