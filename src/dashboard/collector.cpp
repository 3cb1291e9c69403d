#include "dashboard/collector.hpp"

#include <algorithm>

#include "graph/cost_key.hpp"

namespace gf::dashboard {

void Histogram::add(double v) {
  size_t i = 0;
  while (i < kBuckets.size() && v > kBuckets[i]) ++i;
  counts[i]++;
  sum += v;
}

void Histogram::merge(const Histogram &other) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  sum += other.sum;
}

uint64_t Histogram::count() const {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

void NameStats::merge(const NameStats &other) {
  succeeded += other.succeeded;
  failed += other.failed;
  duration.merge(other.duration);
  wait.merge(other.wait);
}

Collector::Collector(std::function<std::string(uint32_t)> key_name)
    : key_name_(std::move(key_name)) {
  names_.push_back("other");
}

void Collector::set_up(size_t workers) {
  shards_ = std::vector<Shard>(workers);
  for (Shard &s : shards_) s.bars.resize(kBarsPerWorker);
}

uint16_t Collector::label_of(Shard &shard, uint32_t cost_id) {
  if (cost_id < shard.label_by_cost.size() && shard.label_by_cost[cost_id] != kUnknownLabel)
    return shard.label_by_cost[cost_id];
  const uint16_t label = intern(key_name_ ? key_name_(cost_id) : std::string());
  if (shard.label_by_cost.size() <= cost_id) shard.label_by_cost.resize(cost_id + 1, kUnknownLabel);
  shard.label_by_cost[cost_id] = label;
  return label;
}

uint16_t Collector::label_of(Shard &shard, std::string_view prefix) {
  auto &seen = shard.by_prefix;
  if (shard.last_hit < seen.size() && seen[shard.last_hit].first == prefix)
    return seen[shard.last_hit].second;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i].first == prefix) {
      shard.last_hit = i;
      return seen[i].second;
    }
  }
  const uint16_t label = intern(prefix);
  // Bounded too: past it, a stream of distinct prefixes goes through intern's map.
  if (seen.size() < 2 * kMaxNames) {
    seen.emplace_back(std::string(prefix), label);
    shard.last_hit = seen.size() - 1;
  }
  return label;
}

uint16_t Collector::intern(std::string_view name) {
  if (name.empty()) name = "unnamed";  // a key made from the body alone
  std::lock_guard lock(names_mu_);
  auto found = by_label_.find(std::string(name));
  if (found != by_label_.end()) return found->second;
  if (names_.size() > kMaxNames) return 0;  // "other"
  const auto index = static_cast<uint16_t>(names_.size());
  names_.emplace_back(name);
  by_label_.emplace(std::string(name), index);
  return index;
}

void Collector::on_finished(const FinishedTask *tasks, size_t count) {
  size_t i = 0;
  while (i < count) {
    const uint32_t worker = tasks[i].worker;
    if (worker >= shards_.size()) {
      ++i;
      continue;
    }
    Shard &shard = shards_[worker];
    std::lock_guard lock(shard.mu);
    for (; i < count && tasks[i].worker == worker; ++i) record(shard, tasks[i]);
  }
}

void Collector::record(Shard &shard, const FinishedTask &task) {
  const uint16_t label = task.cost_id != FinishedTask::kNoCostId
                             ? label_of(shard, task.cost_id)
                             : label_of(shard, cost_key_prefix(task.name ? task.name : ""));
  if (shard.stats.size() <= label) shard.stats.resize(label + 1);
  NameStats &stats = shard.stats[label];
  (task.ok ? stats.succeeded : stats.failed)++;
  stats.duration.add(task.duration_s);
  stats.wait.add(task.queue_wait_s);
  Bar &bar = shard.bars[shard.next_bar++ % kBarsPerWorker];
  bar.end = task.end_s;
  bar.start = task.end_s - task.duration_s;
  bar.name = label;
  bar.ok = task.ok;
}

Collector::Merged Collector::merged() const {
  Merged out;
  out.names = names();
  out.stats.resize(out.names.size());
  for (const Shard &s : shards_) {
    std::lock_guard lock(s.mu);
    for (size_t i = 0; i < s.stats.size() && i < out.stats.size(); ++i)
      out.stats[i].merge(s.stats[i]);
  }
  return out;
}

std::vector<Bar> Collector::bars(size_t worker, double since, size_t limit) const {
  std::vector<Bar> out;
  if (worker >= shards_.size()) return out;
  const Shard &s = shards_[worker];
  std::lock_guard lock(s.mu);
  const size_t have = std::min(s.next_bar, kBarsPerWorker);
  for (size_t k = 0; k < have && out.size() < limit; ++k) {
    const Bar &b = s.bars[(s.next_bar - 1 - k) % kBarsPerWorker];  // newest first
    if (b.end <= since) break;
    out.push_back(b);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> Collector::names() const {
  std::lock_guard lock(names_mu_);
  return names_;
}

}  // namespace gf::dashboard
