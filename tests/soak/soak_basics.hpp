// Soak machinery, part 1: time budget and seeds, the watchdog, randomness and byte patterns,
// findings (soak_test.cpp says what the soak does).
#pragma once

#include <gpuflow.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace soak {

using namespace gft;
using Clock = std::chrono::steady_clock;

constexpr uint64_t KiB = 1ull << 10;
constexpr uint64_t MiB = 1ull << 20;
constexpr int64_t kRunWaitMs = 60000;  // a run that takes longer than this is reported as hung

// ---------------------------------------------------------------------------------------------
// Budget, seeds, watchdog

inline double soak_seconds() {
  const char *e = std::getenv("GPUFLOW_SOAK_SECONDS");
  if (e != nullptr && *e != '\0') {
    char *end = nullptr;
    const double v = std::strtod(e, &end);
    if (end != e && v > 0.0) return v;
  }
  return 20.0;
}

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t mix(uint64_t a, uint64_t b) {
  return splitmix64(a ^ splitmix64(b + 0x632BE59BD9B4E019ull));
}

inline uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char *e = std::getenv("GPUFLOW_SOAK_SEED");
    if (e != nullptr && *e != '\0') return static_cast<uint64_t>(std::strtoull(e, nullptr, 0));
    std::random_device rd;
    const uint64_t hi = rd(), lo = rd();
    return splitmix64((hi << 32) ^ lo ^
                      static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  }();
  return seed;
}

inline std::string current_test_name() {
  const ::testing::TestInfo *info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("?");
}

inline uint64_t seed_for(const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return mix(base_seed(), h);
}

inline std::string seed_note() {
  std::ostringstream o;
  o << "soak seed: replay with GPUFLOW_SOAK_SEED=" << base_seed();
  return o.str();
}

// Aborts the process with a message when a test outlives its limit: the last resort against a
// hang inside a call that takes no timeout (gf_run_destroy, gf_pool_destroy).
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(m_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr,
                         "\n[soak watchdog] %s still running after %lld s: aborting (a call "
                         "without a timeout hangs). %s\n",
                         what_.c_str(), static_cast<long long>(limit.count()), seed_note().c_str());
            std::fflush(stderr);
            std::fflush(stdout);
            std::abort();
          }
        }) {}
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Randomness and byte patterns

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return splitmix64(s_++ * 0xD1B54A32D192ED03ull); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }  // inclusive
  int pick(int lo, int hi) {
    return static_cast<int>(range(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi)));
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t s_;
};

inline void fill_pattern(unsigned char *dst, uint64_t size, uint64_t seed) {
  const uint64_t words = size / 8;
  for (uint64_t i = 0; i < words; ++i) {
    const uint64_t v = splitmix64(seed + i);
    std::memcpy(dst + 8 * i, &v, 8);
  }
  if (size % 8 != 0) {
    const uint64_t v = splitmix64(seed + words);
    std::memcpy(dst + 8 * words, &v, static_cast<size_t>(size % 8));
  }
}

inline uint64_t checksum(const unsigned char *p, uint64_t size) {
  uint64_t h = 0xcbf29ce484222325ull ^ size;
  const uint64_t words = size / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t v = 0;
    std::memcpy(&v, p + 8 * i, 8);
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  if (size % 8 != 0) {
    uint64_t v = 0;
    std::memcpy(&v, p + 8 * words, static_cast<size_t>(size % 8));
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  return splitmix64(h);
}

inline std::vector<unsigned char> pattern(uint64_t size, uint64_t seed) {
  std::vector<unsigned char> v(static_cast<size_t>(size));
  fill_pattern(v.data(), size, seed);
  return v;
}

inline uint64_t pattern_checksum(uint64_t size, uint64_t seed) {
  const std::vector<unsigned char> v = pattern(size, seed);
  return checksum(v.data(), size);
}

// Describes how `got` differs from pattern(size, seed): the first differing byte.
inline std::string pattern_mismatch(const unsigned char *got, uint64_t size, uint64_t seed) {
  const std::vector<unsigned char> want = pattern(size, seed);
  uint64_t diffs = 0, first = size;
  for (uint64_t i = 0; i < size; ++i) {
    if (got[i] != want[i]) {
      if (first == size) first = i;
      ++diffs;
    }
  }
  std::ostringstream o;
  if (diffs == 0) {
    o << "bytes match";
  } else {
    o << diffs << " of " << size << " bytes differ, first at offset " << first << " (got 0x"
      << std::hex << static_cast<int>(got[first]) << ", want 0x" << static_cast<int>(want[first])
      << std::dec << ")";
  }
  return o.str();
}

// ---------------------------------------------------------------------------------------------
// Findings: every problem the test sees, by category. The first of each category fails the test
// with its details (from whichever thread saw it: gtest assertions are thread-safe); later ones
// are only counted, so a soak that keeps going after a problem reports each kind of problem once
// and a summary at the end instead of a flood.

class Findings {
 public:
  void add(const std::string &category, const std::string &detail) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(m_);
      auto it = std::find_if(seen_.begin(), seen_.end(),
                             [&](const auto &e) { return e.first == category; });
      if (it == seen_.end()) {
        seen_.emplace_back(category, 1);
        first = true;
      } else {
        ++it->second;
      }
    }
    if (first)
      ADD_FAILURE() << "[" << category << "]\n  " << detail << "\n  (" << seed_note()
                    << "; later occurrences of this problem are only counted)";
  }
  uint64_t total() {
    std::lock_guard<std::mutex> lock(m_);
    uint64_t n = 0;
    for (const auto &e : seen_) n += e.second;
    return n;
  }
  std::string summary() {
    std::lock_guard<std::mutex> lock(m_);
    std::ostringstream o;
    for (const auto &e : seen_) o << "\n  " << e.second << " x [" << e.first << "]";
    return o.str();
  }
  void reset() {
    std::lock_guard<std::mutex> lock(m_);
    seen_.clear();
  }

 private:
  std::mutex m_;
  std::vector<std::pair<std::string, uint64_t>> seen_;
};

inline Findings &findings() {
  static Findings f;
  return f;
}

inline void finding(const std::string &category, const std::string &detail) {
  findings().add(category, detail);
}

inline std::atomic<int64_t> g_live_plans{0};  // task body plans not yet released by the library

}  // namespace soak
