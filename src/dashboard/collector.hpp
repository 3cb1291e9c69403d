// What the dashboard learns from the pool's event stream (an EventTap): per task name, counts and
// histograms of run time and queue wait; per worker, the latest finished attempts as bars for
// the task stream. Events arrive on worker threads at up to hundreds of thousands a second, so
// each worker has its own shard (its own small lock, no allocation once warm) and readers merge
// the shards when they render. Task names become labels through their cost-key prefix
// ("inc-123" -> "inc"); at most kMaxNames distinct labels are kept, later ones count as "other",
// so a graph of a million distinct names cannot grow the metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/events.hpp"

namespace gf::dashboard {

// Upper bounds (seconds) of the histogram buckets; +Inf is implied.
inline constexpr std::array<double, 12> kBuckets{1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01,
                                                 0.05, 0.1,  0.5,  1.0,  5.0,  30.0};

struct Histogram {
  std::array<uint64_t, kBuckets.size() + 1> counts{};  // per bucket (not cumulative); last: +Inf
  double sum = 0;
  void add(double v);
  void merge(const Histogram &other);
  uint64_t count() const;
};

struct NameStats {
  uint64_t succeeded = 0, failed = 0;
  Histogram duration, wait;
  void merge(const NameStats &other);
};

struct Bar {
  double start = 0, end = 0;  // pool clock, seconds
  uint16_t name = 0;          // label index
  bool ok = true;
};

class Collector : public EventTap {
 public:
  static constexpr size_t kMaxNames = 64;  // labels kept; the rest are "other"
  static constexpr size_t kBarsPerWorker = 512;

  explicit Collector(size_t workers);
  void on_event(const gf_event &event) override;
  void on_events(const gf_event *events, size_t count) override;
  bool wants_started() const override { return false; }  // finishes carry all it needs

  struct Merged {
    std::vector<std::string> names;  // label per index
    std::vector<NameStats> stats;    // per label
  };
  Merged merged() const;
  // Bars of worker w that ended after `since` (at most `limit`, the latest).
  std::vector<Bar> bars(size_t worker, double since, size_t limit) const;
  std::vector<std::string> names() const;

 private:
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::vector<NameStats> stats;  // by label index
    // Prefix -> label index, for prefixes this worker has seen (bounded); the last hit first.
    std::vector<std::pair<std::string, uint16_t>> cache;
    size_t last_hit = 0;
    std::vector<Bar> bars;  // ring
    size_t next_bar = 0;
  };
  uint16_t label_of(Shard &shard, std::string_view prefix);
  void record(Shard &shard, const gf_event &event);  // shard.mu held

  std::vector<Shard> shards_;
  mutable std::mutex names_mu_;
  std::vector<std::string> names_;  // index 0: "other"
  std::unordered_map<std::string, uint16_t> by_label_;
};

}  // namespace gf::dashboard
