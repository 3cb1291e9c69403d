// One execution of a frozen graph on a pool: the per-task and per-data state the scheduler
// drives, and the future the caller waits on. Everything under "scheduler state" is guarded by
// the scheduler's mutex; completion is published separately (done_mu_) so waiters never touch it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "devices/backend.hpp"
#include "graph/graph.hpp"
#include "runtime/replica_set.hpp"
#include "scheduler/resource_registry.hpp"

namespace gf {

class PoolCore;
class Scheduler;

struct TaskRun {
  gf_task_state state = GF_TASK_WAITING;
  uint32_t remaining_deps = 0;
  uint32_t attempts = 0;
  uint32_t worker = kNoIndex;    // placed on / ran on
  uint32_t missing_inputs = 0;   // inputs still moving to the worker's memory space
  uint32_t placement_epoch = 0;  // bumped on every placement; stale transfer waiters ignored
  bool memory_blocked = false;   // an input transfer waits for device memory
  float estimate_s = 0;          // counted in its worker's backlog while queued or running
};

struct DataRun {
  enum class Phase : uint8_t { kPending, kReady, kFreed, kNeverProduced };
  Phase phase = Phase::kPending;
  bool keep = false;
  uint32_t consumers_left = 0;
  uint64_t size = 0;
  uint64_t arriving = 0;  // bit per memory space with a copy of this data in flight
  uint32_t pins = 0;      // copies reading this data right now
  uint32_t uses = 0;      // tasks running on a device that read it: never spilled
  uint32_t holds = 0;     // tasks queued on a device to read it: spilled only as a last resort
  bool free_when_unpinned = false;
  SpaceId spilled_from = kNoSpace;  // the device it was spilled from, while only on host
  ReplicaSet replicas;
  void *value = nullptr;
  gf_destroy_fn value_destroy = nullptr;  // set when the run owns the value

  const Replica *replica_in(SpaceId space) const {
    for (const Replica &r : replicas) {
      if (r.space == space) return &r;
    }
    return nullptr;
  }
};

// A request resolved against the pool, shared by all tasks of the run that use it.
struct ResolvedRequest {
  PoolRequest request;
  FixedPoint gpu_memory;              // the gpu_memory part, also inside `request`
  std::vector<uint32_t> cpu_workers;  // workers that could ever run a cpu_fn with it
  std::vector<uint32_t> gpu_workers;  // workers that could ever run a gpu_fn with it
};

class Run : public std::enable_shared_from_this<Run> {
 public:
  Run(std::shared_ptr<PoolCore> pool, Scheduler &scheduler, std::shared_ptr<Graph> graph,
      const gf_submit_options &options);
  ~Run();
  Run(const Run &) = delete;
  Run &operator=(const Run &) = delete;

  PoolCore &pool() { return *pool_; }
  const Graph &graph() const { return *graph_; }
  // The task's body: the graph's own, or its named kernel as resolved for this run.
  const TaskBody &body(TaskIndex t) const {
    return resolved_bodies.empty() ? graph_->task(t).body : resolved_bodies[t];
  }
  uint64_t sequence() const { return sequence_; }
  void set_sequence(uint64_t sequence) { sequence_ = sequence; }

  // ---- scheduler state (guarded by the scheduler mutex) ----
  std::vector<TaskRun> tasks;
  std::vector<DataRun> data;
  std::vector<ResolvedRequest> requests;  // by graph RequestId
  std::vector<TaskBody> resolved_bodies;  // by task, only when the graph names kernels
  std::vector<uint32_t> cost_ids;         // by graph cost key: the scheduler's cost id
  std::unordered_map<TaskIndex, std::string> errors;
  struct Waiter {
    TaskIndex task;
    uint32_t epoch;
  };
  std::unordered_multimap<uint64_t, Waiter> transfer_waiters;  // key: data << 8 | space
  uint64_t tasks_left = 0;
  uint64_t succeeded = 0, failed = 0, cancelled = 0, attempts = 0;
  uint64_t transfers = 0, bytes_transferred = 0;
  TaskIndex first_failure = kNoIndex;
  bool finished = false;
  // The caller dropped the run (gf_run_destroy): once finished, the scheduler frees everything
  // it still holds and lets go of it. Until both, the scheduler keeps the run alive, so nothing
  // it lists (spill order, queues, copies) can ever point at a run being destroyed.
  bool released = false;
  Clock::time_point submitted_at = Clock::now();
  Clock::time_point finished_at;
  gf_run_state final_state = GF_RUN_RUNNING;

  // Set by cancel (any thread); bodies and dispatched batches check it without the lock.
  std::atomic<bool> cancel_requested{false};

  // ---- completion, published once after the scheduler finished the run ----
  void publish_completion();  // runs the callback, then wakes waiters and the descriptor
  // Runs `then` once the completion is published (the callback has returned): now if it already
  // is, else on the publishing thread right after.
  void when_published(std::function<void()> then);
  bool has_callback() const { return on_complete_ != nullptr; }
  // Blocks until published or timeout; true when published. A body on one of the pool's worker
  // threads steps aside while it waits (runtime/worker.hpp); one waiting for its own run fails.
  bool wait_published(int64_t timeout_ms);
  bool published() const { return published_.load(std::memory_order_acquire); }
  int completion_fd();  // created on first use
  gf_run_state state() const { return state_.load(std::memory_order_acquire); }
  void set_state(gf_run_state state) { state_.store(state, std::memory_order_release); }
  void set_handle(gf_run *handle) { handle_ = handle; }
  gf_run *handle() const { return handle_; }

 private:
  std::shared_ptr<PoolCore> pool_;
  Scheduler &scheduler_;
  std::shared_ptr<Graph> graph_;
  uint64_t sequence_ = 0;
  gf_run_callback on_complete_;
  void *on_complete_data_;
  gf_run *handle_ = nullptr;
  std::atomic<gf_run_state> state_{GF_RUN_RUNNING};
  std::atomic<bool> published_{false};
  std::function<void()> after_publish_;  // guarded by done_mu_
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  int event_fd_ = -1;
};

}  // namespace gf
