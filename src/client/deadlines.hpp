// Answer deadlines of the client's calls, in milliseconds on the steady clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace gf::client {

inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t deadline_in(int64_t ms) {
  return now_ms() + ms;
}

}  // namespace gf::client
