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

Collector::Collector(size_t workers) : shards_(workers) {
  names_.push_back("other");
  for (Shard &s : shards_) s.bars.resize(kBarsPerWorker);
}

uint16_t Collector::label_of(Shard &shard, const char *name) {
  auto it = shard.cache.find(name);
  if (it != shard.cache.end()) return it->second;
  std::string label(cost_key_prefix(name ? name : ""));
  if (label.empty()) label = "unnamed";
  uint16_t index = 0;
  {
    std::lock_guard lock(names_mu_);
    auto found = by_label_.find(label);
    if (found != by_label_.end()) {
      index = found->second;
    } else if (names_.size() <= kMaxNames) {
      index = static_cast<uint16_t>(names_.size());
      names_.push_back(label);
      by_label_.emplace(label, index);
    }
  }
  // The cache is bounded too: a stream of distinct names goes through the lookup above.
  if (shard.cache.size() < 4096) shard.cache.emplace(name, index);
  return index;
}

void Collector::on_event(const gf_event &event) {
  if (event.worker >= shards_.size()) return;
  Shard &shard = shards_[event.worker];
  std::lock_guard lock(shard.mu);
  if (event.kind == GF_EVENT_TASK_STARTED) {
    shard.started++;
    return;
  }
  if (event.kind != GF_EVENT_TASK_FINISHED) return;
  const uint16_t label = label_of(shard, event.task_name);
  if (shard.stats.size() <= label) shard.stats.resize(label + 1);
  NameStats &stats = shard.stats[label];
  (event.ok ? stats.succeeded : stats.failed)++;
  stats.duration.add(event.duration_s);
  stats.wait.add(event.queue_wait_s);
  Bar &bar = shard.bars[shard.next_bar++ % kBarsPerWorker];
  bar.end = event.time_s;
  bar.start = event.time_s - event.duration_s;
  bar.name = label;
  bar.ok = event.ok != 0;
}

Collector::Merged Collector::merged() const {
  Merged out;
  out.names = names();
  out.stats.resize(out.names.size());
  for (const Shard &s : shards_) {
    std::lock_guard lock(s.mu);
    out.started += s.started;
    for (size_t i = 0; i < s.stats.size() && i < out.stats.size(); ++i) out.stats[i].merge(s.stats[i]);
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
