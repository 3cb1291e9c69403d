// What the dashboard learns from the pool's event stream (an EventTap): per cost key, counts and
// histograms of run time and queue wait; per worker, the latest finished attempts as bars for
// the task stream. Finishes arrive on worker threads at millions a second, so each worker has its
// own shard (its own small lock, no allocation once warm) and readers merge the shards when they
// render. Labels are task names' prefixes ("inc-123" -> "inc"), as Dask's task stream groups
// keys. Where the scheduler derived the task's cost key from its name (or its kernel or command),
// the key is that label, so a shard maps cost ids to labels with one vector lookup and asks for
// a key's name once; for tasks that chose their own cost key the name is read. At most kMaxNames
// distinct labels are kept, later ones count as "other", so a graph of a million distinct names
// cannot grow the metrics. It is the scheduler's observer too (scheduler/observer.hpp): set up
// with a shard per worker, and registered, so that the finishes it reads carry queue waits.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/events.hpp"
#include "scheduler/observer.hpp"

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

class Collector : public EventTap, public SchedulerObserver {
 public:
  static constexpr size_t kMaxNames = 64;  // labels kept; the rest are "other"
  static constexpr size_t kBarsPerWorker = 512;

  // key_name: the name of a cost id (Scheduler::cost_key_name); called once per id and worker.
  explicit Collector(std::function<std::string(uint32_t cost_id)> key_name);
  // A shard per worker; before it is tapped into the event stream (Scheduler::add_observer).
  void set_up(size_t workers) override;
  void on_finished(const FinishedTask *tasks, size_t count) override;

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
    std::vector<NameStats> stats;         // by label index
    std::vector<uint16_t> label_by_cost;  // by cost id; kUnknownLabel: not asked yet
    // Prefix -> label index, for prefixes this worker has seen (bounded); the last hit first.
    std::vector<std::pair<std::string, uint16_t>> by_prefix;
    size_t last_hit = 0;
    std::vector<Bar> bars;  // ring
    size_t next_bar = 0;
  };
  static constexpr uint16_t kUnknownLabel = UINT16_MAX;
  uint16_t label_of(Shard &shard, uint32_t cost_id);         // shard.mu held
  uint16_t label_of(Shard &shard, std::string_view prefix);  // shard.mu held
  uint16_t intern(std::string_view name);
  void record(Shard &shard, const FinishedTask &task);  // shard.mu held

  std::vector<Shard> shards_;
  std::function<std::string(uint32_t)> key_name_;
  mutable std::mutex names_mu_;
  std::vector<std::string> names_;  // index 0: "other"
  std::unordered_map<std::string, uint16_t> by_label_;
};

}  // namespace gf::dashboard
