// How long tasks take, as learnt from the ones that finished: one estimate per cost key
// (gf_task_desc.cost_key) and worker kind, an exponential moving average. Cost keys get
// scheduler-wide ids once per graph (map_cost_keys, under this part's own mutex), so every later
// lookup is a vector index. What a key's CPU estimate says about tiny tasks is published to each
// run (RunState::tiny_costs) for the worker threads that decide without the scheduler's mutex.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/run_state.hpp"
#include "scheduler/scheduling_lock.hpp"

namespace gf {

// Placement's guess for a body never seen finishing.
inline constexpr double kUnknownDuration = 1e-4;
// Tasks learnt to take less than this are timed one batch in kTimedEvery: a clock reading costs
// 20-60 ns here, and the estimates of tiny tasks need no more samples than that.
inline constexpr double kTinyTask = 5e-6;
inline constexpr uint32_t kTimedEvery = 16;

class Estimates {
 public:
  // Ids of the graph's cost keys (by Graph::cost_keys index), new keys numbered as they come.
  std::vector<uint32_t> map_cost_keys(const Graph &graph);
  // The cost key an id stands for ("" for a key made from a body alone).
  std::string cost_key_name(uint32_t cost_id);

  // Task t's estimate on a worker of `kind` (kUnknownDuration until one finished).
  double estimate(const RunState &run, TaskIndex t, gf_worker_kind kind) const
      GF_REQUIRES(scheduling_lock) {
    const size_t slot = slot_of(run, t, kind);
    return slot < seconds_.size() && seconds_[slot] >= 0 ? seconds_[slot] : kUnknownDuration;
  }
  // One finished attempt of t, on a worker of `kind`, took `seconds`.
  void learn(const RunState &run, TaskIndex t, gf_worker_kind kind, double seconds)
      GF_REQUIRES(scheduling_lock);
  // Learning a row of attempts of one cost key (alike tasks settled together): each add() is one
  // attempt; the tiny flag is published once, when the row is done.
  class Row {
   public:
    Row(Estimates &estimates, const RunState &run, gf_worker_kind kind)
        : estimates_(estimates), run_(run), kind_(kind) {}
    void add(TaskIndex t, double seconds) GF_REQUIRES(scheduling_lock);
    void done() GF_REQUIRES(scheduling_lock);

   private:
    Estimates &estimates_;
    const RunState &run_;
    gf_worker_kind kind_;
    TaskIndex first_ = kNoIndex;
    size_t slot_ = SIZE_MAX;
  };
  // Publishes to a run about to start what earlier runs learnt of its cost keys.
  void publish_tiny(RunState &run) const GF_REQUIRES(scheduling_lock);

 private:
  static size_t slot_of(const RunState &run, TaskIndex t, gf_worker_kind kind) {
    return size_t{run.cost_ids[run.graph().task(t).cost_key]} * 2 + (kind == GF_WORKER_GPU);
  }
  double &slot(size_t index) GF_REQUIRES(scheduling_lock);
  static void blend(double &estimate_s, double seconds) {
    estimate_s = estimate_s < 0 ? seconds : 0.8 * estimate_s + 0.2 * seconds;
  }
  static void note_tiny(const RunState &run, TaskIndex t, gf_worker_kind kind, double estimate_s);

  std::vector<double> seconds_ GF_GUARDED_BY(scheduling_lock);  // by slot; negative: none yet
  std::mutex keys_mu_;  // the maps below; taken by prepare, outside the scheduler's mutex
  std::unordered_map<std::string, uint32_t> key_ids_;
  std::unordered_map<gf_task_fn, uint32_t> fn_ids_;
  std::vector<std::string> key_names_;  // by id
};

}  // namespace gf
