#include "scheduler/estimates.hpp"

namespace gf {

std::vector<uint32_t> Estimates::map_cost_keys(const Graph &graph) {
  const auto &keys = graph.cost_keys();
  std::vector<uint32_t> ids(keys.size());
  std::lock_guard<std::mutex> lock(keys_mu_);
  for (size_t k = 0; k < keys.size(); ++k) {
    const auto next = static_cast<uint32_t>(key_names_.size());
    ids[k] = keys[k].name.empty() ? fn_ids_.emplace(keys[k].fn, next).first->second
                                  : key_ids_.emplace(keys[k].name, next).first->second;
    if (ids[k] == next) key_names_.push_back(keys[k].name);
  }
  return ids;
}

std::string Estimates::cost_key_name(uint32_t cost_id) {
  std::lock_guard<std::mutex> lock(keys_mu_);
  return cost_id < key_names_.size() ? key_names_[cost_id] : std::string();
}

double &Estimates::slot(size_t index) {
  if (index >= seconds_.size()) seconds_.resize(index + 1, -1.0);
  return seconds_[index];
}

void Estimates::learn(const RunState &run, TaskIndex t, gf_worker_kind kind, double seconds) {
  double &e = slot(slot_of(run, t, kind));
  blend(e, seconds);
  note_tiny(run, t, kind, e);
}

void Estimates::Row::add(TaskIndex t, double seconds) {
  // Found once, by index: a parked successor settled on the way may learn into a new slot.
  if (slot_ == SIZE_MAX) {
    first_ = t;
    slot_ = slot_of(run_, t, kind_);
    estimates_.slot(slot_);
  }
  blend(estimates_.seconds_[slot_], seconds);
}

void Estimates::Row::done() {
  if (slot_ != SIZE_MAX) note_tiny(run_, first_, kind_, estimates_.seconds_[slot_]);
}

void Estimates::note_tiny(const RunState &run, TaskIndex t, gf_worker_kind kind,
                          double estimate_s) {
  if (kind == GF_WORKER_CPU) {
    run.tiny_costs[run.graph().task(t).cost_key].store(estimate_s < kTinyTask,
                                                       std::memory_order_relaxed);
  }
}

void Estimates::publish_tiny(RunState &run) const {
  for (size_t key = 0; key < run.cost_ids.size(); ++key) {
    const size_t index = size_t{run.cost_ids[key]} * 2;
    const bool tiny =
        index < seconds_.size() && seconds_[index] >= 0 && seconds_[index] < kTinyTask;
    run.tiny_costs[key].store(tiny, std::memory_order_relaxed);
  }
}

}  // namespace gf
