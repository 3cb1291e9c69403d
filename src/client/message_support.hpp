// Small pieces both halves of the connection (connection.cpp, blobs.cpp) read messages with.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "wire/framing.hpp"

namespace gf::client {

// Milliseconds on the steady clock: answer deadlines.
inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t deadline_in(int64_t ms) {
  return now_ms() + ms;
}

// A message's string, empty when absent.
inline std::string str(const flatbuffers::String *s) {
  return s ? s->str() : std::string();
}

}  // namespace gf::client
