// Device memory a body asks for while it runs (outputs of a size known only then, device values),
// and tasks that can never fit: failed once the whole pool has gone quiet, rather than hang.
#include <chrono>
#include <thread>

#include "core/error.hpp"
#include "scheduler/batching.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

void Scheduler::discharge_output(WorkerState &worker, uint64_t bytes) {
  Lock lock(mu_);
  memory_.discharge(worker.space, bytes);
}

bool Scheduler::charge_value(WorkerState &worker, uint64_t bytes) {
  if (worker.space == kHostSpace || bytes == 0) return true;
  for (;;) {
    Deferred deferred;
    uint64_t moving = 0;
    {
      Lock lock(mu_);
      if (stopping_) return false;
      if (memory_.charge_value(worker, bytes, deferred, moving)) return true;
    }
    deferred.flush(backend_);  // value spills run here, on this thread
    if (moving == 0) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // buffer copies under way
  }
}

bool Scheduler::charge_output(WorkerState &worker, uint64_t bytes) {
  if (worker.space == kHostSpace) return true;
  Lock lock(mu_);
  return worker.memory.reserve(bytes);
}

void Scheduler::fail_stuck_on_memory(Deferred &deferred) {
  // Nothing runs and nothing moves anywhere, so nothing will free device memory: a task at the
  // head of a device's queue that does not fit now, even after spilling, never will. Fail it
  // rather than hang.
  for (auto &w : workers_) {  // memory freed since a worker last looked may unblock its tasks
    if (w->memory.take_released()) retry_memory_blocked(*w, deferred);
  }
  if (memory_.moving() > 0) return;  // those copies will change the picture
  for (auto &w : workers_) {
    if (w->space == kHostSpace) continue;  // without running tasks, host resources are all free
    while (!w->ready.empty()) {
      const QueuedTask entry = w->ready.top();
      RunState &run = *entry.run;
      const TaskDesc &task = run.graph().task(entry.task);
      const ResolvedRequest &r = run.requests[task.request];
      uint64_t outputs = declared_output_bytes(run.graph(), task);
      if (w->memory.fits_now(r.request, outputs)) break;
      uint64_t short_by = w->memory.shortfall(r.gpu_memory, outputs);
      const uint64_t moving = memory_.make_room_for(*w, run, entry.task, short_by, true, deferred);
      if (moving > 0) break;
      w->ready.pop();
      unqueue(*w, run, entry.task);
      w->backlog_s -= run.tasks[entry.task].estimate_s;
      uint64_t free = w->memory.free();
      fail_task(run, entry.task,
                "out of memory: " + run.graph().task_label(entry.task) + " needs " +
                    std::to_string(static_cast<uint64_t>(r.gpu_memory.to_double())) +
                    " bytes of gpu_memory plus " + std::to_string(outputs) +
                    " bytes of outputs on " + w->name + ", which has " + std::to_string(free) +
                    " bytes free; the rest is held by data no running task will release",
                deferred);
    }
    // Tasks whose inputs wait for memory: the oldest may push out inputs that later tasks hold
    // (never its own); the others wait for it, so two tasks never evict each other's inputs.
    bool retry = false, spilling_for_one = false;
    for (size_t i = 0; i < w->fetching.size();) {
      TaskRef ref = w->fetching[i];
      TaskRun &tr = ref.run->tasks[ref.task];
      if (!tr.memory_blocked) {
        ++i;
        continue;
      }
      uint64_t missing = 0;
      const Graph &graph = ref.run->graph();
      const DataIndex *in = graph.inputs(graph.task(ref.task));
      for (uint32_t k = 0; k < graph.task(ref.task).input_count; ++k) {
        const DataRun &data = ref.run->data[in[k]];
        if (memory_.needs_move(*ref.run, in[k], w->space)) {
          missing = std::min(missing + data.size, FixedPoint::kMaxBytes + 1);
        }
      }
      uint64_t free = w->memory.free();
      uint64_t short_by = missing > free ? missing - free : 0;
      if (short_by == 0 || spilling_for_one) {
        retry = retry || short_by == 0;
        ++i;
        continue;
      }
      const uint64_t moving =
          memory_.make_room_for(*w, *ref.run, ref.task, short_by, true, deferred);
      if (moving > 0) {
        retry = spilling_for_one = true;  // room once the spill copies land
        ++i;
        continue;
      }
      w->fetching[i] = w->fetching.back();
      w->fetching.pop_back();
      unqueue(*w, *ref.run, ref.task);
      w->backlog_s -= tr.estimate_s;
      fail_task(*ref.run, ref.task,
                "out of memory: the inputs of " + ref.run->graph().task_label(ref.task) +
                    " do not fit on " + w->name + " next to the data held there",
                deferred);
    }
    if (w->memory.take_released() || retry) retry_memory_blocked(*w, deferred);
  }
}

}  // namespace gf
