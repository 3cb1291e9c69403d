// One execution of a frozen graph, as the scheduler sees it, in three kinds of state: what is set
// up before it starts and only read after (the graph, resolved requests and bodies), what the
// scheduler changes under its mutex (task and data states, errors, transfer waiters, counters),
// and the atomics worker threads read and write without it (claims, join counts, published
// buffers, tiny flags, the cancel flag); and the completion the caller's Run handle waits on,
// published once the scheduler has finished the run. The scheduler keeps every run it started until
// the run has both finished and been released by its caller, so nothing it lists can point at a run
// being destroyed.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "core/completion.hpp"
#include "core/large_array.hpp"
#include "devices/backend.hpp"
#include "graph/graph.hpp"
#include "scheduler/replica_set.hpp"
#include "scheduler/resource_registry.hpp"
#include "scheduler/scheduling_lock.hpp"

namespace gf {

// Taken once, by whichever thread gets there first: a worker about to run a waiting task right
// after its last predecessor (scheduler/continuation.cpp), or a cancel settling it. Given back
// (under the scheduler's mutex) when a task that ran that way waits again, for a retry. Copies
// (the vector of a run's tasks, built before the run starts) copy the value.
struct ClaimFlag {
  ClaimFlag() = default;
  ClaimFlag(const ClaimFlag &other) : taken(other.taken.load(std::memory_order_relaxed)) {}
  ClaimFlag &operator=(const ClaimFlag &other) {
    taken.store(other.taken.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
  bool take() { return !taken.exchange(true, std::memory_order_acq_rel); }
  bool is_taken() const { return taken.load(std::memory_order_acquire); }
  void give_back() { taken.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> taken{false};
};

// How many predecessors of a task with several have yet to succeed on a worker thread that
// counts them down (scheduler/continuation.cpp): the thread that counts the last one down may run
// the task at once, on its own thread. A hint read without the scheduler's mutex: a predecessor
// that is not counted (a GPU task, a failure, a thread that may not run successors) leaves it
// above zero, and the task becomes ready the usual way. Set up before the run starts (plain
// stores, published with the run); counted atomically from then on.
class JoinCount {
 public:
  explicit JoinCount(uint32_t &left) : left_(left) {}
  // One predecessor succeeded; true for the call that counts the last one down. Acquire and
  // release: that caller sees what every counted predecessor's thread published before it.
  bool count_down() { return left_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  // Whether the caller's predecessor is the last to be counted (every other one counted down
  // already: the caller then need not count, nor publish for anyone). Acquire, as count_down.
  bool is_last() const { return left_.load(std::memory_order_acquire) == 1; }

 private:
  std::atomic_ref<uint32_t> left_;
};

// A task's state in one run. Every field but the claim is the scheduler's, under its mutex.
struct TaskRun {
  gf_task_state state GF_GUARDED_BY(scheduling_lock) = GF_TASK_WAITING;
  uint32_t remaining_deps GF_GUARDED_BY(scheduling_lock) = 0;
  uint32_t attempts GF_GUARDED_BY(scheduling_lock) = 0;
  uint32_t worker GF_GUARDED_BY(scheduling_lock) = kNoIndex;  // placed on / ran on
  // Inputs still moving to the worker's memory space.
  uint32_t missing_inputs GF_GUARDED_BY(scheduling_lock) = 0;
  // Bumped on every placement; stale transfer waiters are ignored.
  uint32_t placement_epoch GF_GUARDED_BY(scheduling_lock) = 0;
  bool memory_blocked GF_GUARDED_BY(scheduling_lock) = false;  // an input waits for memory
  ClaimFlag claim;  // taken without the mutex (scheduler/direct_run.hpp)
  // Counted in its worker's backlog while queued or running.
  float estimate_s GF_GUARDED_BY(scheduling_lock) = 0;
};

// How a device value moves to host memory and back (gf_value_ops, copied).
struct ValueOps {
  void *(*spill)(void *, void *) = nullptr;
  void *(*unspill)(void *, int32_t, void *) = nullptr;
  void *user_data = nullptr;
  bool movable() const { return spill && unspill; }
};

struct DataRun {
  // kLeftToConsumer: made by a task whose only consumer left ran directly after it in the same
  // batch (scheduler/continuation.cpp). Its producer did not store it; its consumer's completion
  // frees it, or stores it as its producer would have (Scheduler::store_left_inputs). Only ever
  // seen while one batch is completed, under the scheduler's mutex.
  enum class Phase : uint8_t { kPending, kReady, kFreed, kNeverProduced, kLeftToConsumer };
  // Ordered so that a run's data objects, one per task's output, pack tightly.
  Phase phase = Phase::kPending;
  bool keep = false;
  bool free_when_unpinned = false;
  uint32_t consumers_left = 0;
  uint64_t size = 0;
  uint64_t arriving = 0;  // bit per memory space with a copy of this data in flight
  uint32_t pins = 0;      // copies (and caller reads) reading this data right now
  uint32_t uses = 0;      // tasks running on a device that read it: never spilled
  uint32_t holds = 0;     // tasks placed on a device to read it: spilled only as a last resort
  SpaceId spilled_from = kNoSpace;  // the device it was spilled from, while only on host
  ReplicaSet replicas;
  void *value = nullptr;
  gf_destroy_fn value_destroy = nullptr;  // set when the run owns the value
  // A value set with gf_task_ctx_set_device_value on a device lives in `replicas` (value
  // replicas: its device form, and its host form while spilled) and `value` is its current form;
  // without movable ops it is pinned where it is. Few data objects have ops: they live apart
  // (a pointer here, not 24 bytes in every data object of every run).
  bool value_movable() const { return movable_ops_ != nullptr; }
  ValueOps value_ops() const { return movable_ops_ ? *movable_ops_ : ValueOps{}; }
  void set_value_ops(const ValueOps &ops) {
    movable_ops_ = ops.movable() ? std::make_unique<ValueOps>(ops) : nullptr;
  }
  void pin_value() { movable_ops_.reset(); }  // it stays where it is from now on

  bool device_value() const {
    for (const Replica &r : replicas) {
      if (r.value) return true;
    }
    return false;
  }
  // Points `value` at the current form of a device value: a device form when there is one.
  void refresh_value() {
    for (const Replica &r : replicas) {
      if (r.value && r.space != kHostSpace) {
        value = r.ptr;
        return;
      }
    }
    for (const Replica &r : replicas) {
      if (r.value) value = r.ptr;
    }
  }

  const Replica *replica_in(SpaceId space) const {
    for (const Replica &r : replicas) {
      if (r.space == space) return &r;
    }
    return nullptr;
  }

 private:
  std::unique_ptr<ValueOps> movable_ops_;
};

// A request resolved against the pool, shared by all tasks of the run that use it.
struct ResolvedRequest {
  PoolRequest request;
  FixedPoint gpu_memory;              // the gpu_memory part, also inside `request`
  std::vector<uint32_t> cpu_workers;  // workers that could ever run a cpu_fn with it
  std::vector<uint32_t> gpu_workers;  // workers that could ever run a gpu_fn with it
};

using TaskRuns = std::vector<TaskRun, LargeArrayAllocator<TaskRun>>;
using DataRuns = std::vector<DataRun, LargeArrayAllocator<DataRun>>;

// The per-task and per-data arrays of the run that finished last, kept for the next run of about
// its size: its pages are resident, so setting up the next run faults none in (glibc maps such
// arrays afresh for every run or not, depending on its heap's history). At most one set is kept,
// within
// kKeptBytes, and an unfitting one is freed before the next run allocates its own: the most
// memory a pool holds at once is what it held without it.
class SpareRunArrays {
 public:
  static constexpr size_t kKeptBytes = size_t{256} << 20;
  // Takes a run's arrays once it is done with them: their elements are destroyed now.
  void give_back(TaskRuns &&tasks, DataRuns &&data);
  // Empty arrays with room for `task_count` tasks and `data_count` data objects, in kept memory
  // when a kept set is large enough and not more than twice that.
  void take(TaskRuns &tasks, size_t task_count, DataRuns &data, size_t data_count);
  size_t kept_bytes();  // for tests

 private:
  std::mutex mu_;
  TaskRuns tasks_;
  DataRuns data_;
};

class RunState : public std::enable_shared_from_this<RunState> {
 public:
  explicit RunState(std::shared_ptr<Graph> graph) : graph_(std::move(graph)) {}
  ~RunState();
  RunState(const RunState &) = delete;
  RunState &operator=(const RunState &) = delete;

  const Graph &graph() const { return *graph_; }
  // The task's body: the graph's own, or its named kernel as resolved for this run.
  const TaskBody &body(TaskIndex t) const {
    return resolved_bodies.empty() ? graph_->task(t).body : resolved_bodies[t];
  }
  // Whether task `t` needs nothing but a CPU slot: no resource request and a CPU body only (a
  // task that could also run on a device is left to placement, which weighs both).
  bool needs_only_cpu(TaskIndex t) const {
    if (graph_->task(t).request != kEmptyRequest) return false;
    const TaskBody &b = body(t);
    return b.cpu_fn && !b.gpu_fn;
  }
  // ---- Set up before the run starts (prepare, start), read by any thread after ----
  uint64_t sequence = 0;     // the scheduler's number for it, set by start() under the mutex
  gf_run *handle = nullptr;  // the caller's handle, for events
  // Unique among every run of every pool and process ("run-<UTC time>-<pid>-<pool>.<n>"): names
  // the run's own log directory, so runs of one graph never share log files.
  std::string name;
  std::shared_ptr<SpareRunArrays> spare_arrays;  // where tasks and data go when the run does
  std::vector<ResolvedRequest> requests;         // by graph RequestId
  std::vector<TaskBody> resolved_bodies;  // by task, only when the graph names kernels/commands
  std::shared_ptr<CommandResolver> command_bodies;  // what resolved command bodies point into
  std::vector<uint32_t> cost_ids;                   // by graph cost key: the scheduler's cost id
  bool has_values = false;  // some data is an opaque value (counted in use by CPU tasks too)
  Clock::time_point submitted_at = Clock::now();
  // Per task: its state. The array never changes size once set up; each TaskRun says which of
  // its fields the mutex guards.
  TaskRuns tasks;

  // ---- The scheduler's, under its mutex ----
  DataRuns data GF_GUARDED_BY(scheduling_lock);  // per data object
  std::unordered_map<TaskIndex, std::string> errors GF_GUARDED_BY(scheduling_lock);
  // Records task t's error in the one form every run uses (graph/task_error.hpp).
  void set_error(TaskIndex t, std::string what) GF_REQUIRES(scheduling_lock);
  struct Waiter {
    TaskIndex task;
    uint32_t epoch;
  };
  // Tasks waiting for a copy, by data << 8 | space.
  std::unordered_multimap<uint64_t, Waiter> transfer_waiters GF_GUARDED_BY(scheduling_lock);
  uint64_t tasks_left GF_GUARDED_BY(scheduling_lock) = 0;
  uint64_t succeeded GF_GUARDED_BY(scheduling_lock) = 0;
  uint64_t failed GF_GUARDED_BY(scheduling_lock) = 0;
  uint64_t cancelled GF_GUARDED_BY(scheduling_lock) = 0;
  uint64_t attempts GF_GUARDED_BY(scheduling_lock) = 0;
  uint64_t transfers GF_GUARDED_BY(scheduling_lock) = 0;
  uint64_t bytes_transferred GF_GUARDED_BY(scheduling_lock) = 0;
  TaskIndex first_failure GF_GUARDED_BY(scheduling_lock) = kNoIndex;
  bool finished GF_GUARDED_BY(scheduling_lock) = false;
  // The caller dropped the run: once finished, the scheduler frees everything it still holds
  // and lets go of it.
  bool released GF_GUARDED_BY(scheduling_lock) = false;
  Clock::time_point finished_at GF_GUARDED_BY(scheduling_lock);

  // ---- Atomic: read and written without the mutex (scheduler/direct_run.hpp) ----
  // By graph cost key: whether its CPU estimate is under kTinyTask. Written under the scheduler's
  // mutex as estimates are learnt, read by worker threads deciding what to run directly; sized
  // once, before the run starts.
  std::unique_ptr<std::atomic<bool>[]> tiny_costs;
  // By task, for tasks with two or more predecessors (edges, as the graph lists them): their
  // JoinCount. Null when the graph has no such task; other tasks' entries are never read.
  std::unique_ptr<uint32_t[]> join_counts;
  JoinCount join_count(TaskIndex t) { return JoinCount(join_counts[t]); }
  // By data: a produced buffer's bytes as its producer's worker thread made them, written by
  // that thread before it counts down the producer's successors (join_counts), and read by
  // the thread that counts one down last, to run it at once. Set only for producers that
  // succeeded; nothing else reads it. Null when join_counts is.
  struct MadeBuffer {
    const void *ptr;
    uint64_t size;
  };
  std::unique_ptr<MadeBuffer[]> made_buffers;
  // Set by cancel (any thread); bodies and dispatched batches check it without the lock.
  std::atomic<bool> cancel_requested{false};
  // The final state, readable without the lock once set (GF_RUN_RUNNING until then).
  gf_run_state state() const { return state_.load(std::memory_order_acquire); }
  void set_state(gf_run_state state) { state_.store(state, std::memory_order_release); }

  Completion completion;  // published by the scheduler after the run finished

 private:
  std::shared_ptr<Graph> graph_;
  std::atomic<gf_run_state> state_{GF_RUN_RUNNING};
};

}  // namespace gf
