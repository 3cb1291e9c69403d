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

uint16_t Collector::label_of(Shard &shard, std::string_view prefix) {
  if (prefix.empty()) prefix = "unnamed";
  if (shard.last_hit < shard.cache.size() && shard.cache[shard.last_hit].first == prefix)
    return shard.cache[shard.last_hit].second;
  for (size_t i = 0; i < shard.cache.size(); ++i) {
    if (shard.cache[i].first == prefix) {
      shard.last_hit = i;
      return shard.cache[i].second;
    }
  }
  uint16_t index = 0;
  {
    std::lock_guard lock(names_mu_);
    auto found = by_label_.find(std::string(prefix));
    if (found != by_label_.end()) {
      index = found->second;
    } else if (names_.size() <= kMaxNames) {
      index = static_cast<uint16_t>(names_.size());
      names_.emplace_back(prefix);
      by_label_.emplace(std::string(prefix), index);
    }
  }
  // Bounded too: past it, a stream of distinct prefixes goes through the lookup above.
  if (shard.cache.size() < 2 * kMaxNames) {
    shard.cache.emplace_back(std::string(prefix), index);
    shard.last_hit = shard.cache.size() - 1;
  }
  return index;
}

void Collector::on_event(const gf_event &event) {
  if (event.worker >= shards_.size() || event.kind != GF_EVENT_TASK_FINISHED) return;
  Shard &shard = shards_[event.worker];
  std::lock_guard lock(shard.mu);
  record(shard, event);
}

void Collector::on_events(const gf_event *events, size_t count) {
  size_t i = 0;
  while (i < count) {
    const uint32_t worker = events[i].worker;
    if (worker >= shards_.size()) {
      ++i;
      continue;
    }
    Shard &shard = shards_[worker];
    std::lock_guard lock(shard.mu);
    for (; i < count && events[i].worker == worker; ++i) {
      if (events[i].kind == GF_EVENT_TASK_FINISHED) record(shard, events[i]);
    }
  }
}

void Collector::record(Shard &shard, const gf_event &event) {
  const uint16_t label = label_of(shard, cost_key_prefix(event.task_name ? event.task_name : ""));
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
