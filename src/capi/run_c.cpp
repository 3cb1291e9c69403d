// C shims: submitting graphs and everything a caller does with the resulting run.
#include <cstring>

#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

TaskIndex task_of(Run &run, gf_task task) {
  return run.graph().task_index(task, "task");
}

// Reads one task's state under the scheduler mutex: read(run, task_index, task_run).
template <class Out, class Read>
gf_status read_task(Out *out, gf_run *run, gf_task task, Read read) {
  return guard([&] {
    require_out(out, "out");
    Run &r = run_of(run);
    TaskIndex t = task_of(r, task);
    std::lock_guard lock(r.pool().scheduler().mu);
    *out = read(r, t, r.tasks[t]);
    return GF_OK;
  });
}

// The outcome of a finished run as a status, with a message naming the first failure.
gf_status outcome(Run &run) {
  switch (run.state()) {
    case GF_RUN_SUCCEEDED:
      return GF_OK;
    case GF_RUN_CANCELLED:
      fail(GF_ERR_CANCELLED, "the run was cancelled");
    case GF_RUN_FAILED: {
      std::lock_guard lock(run.pool().scheduler().mu);
      TaskIndex t = run.first_failure;
      auto it = run.errors.find(t);
      fail(GF_ERR_TASK_FAILED, run.graph().task_label(t) + " failed: " +
                                   (it == run.errors.end() ? std::string("?") : it->second) + " (" +
                                   std::to_string(run.failed) + " task(s) failed in all)");
    }
    default:
      break;
  }
  return GF_TIMEOUT;
}

// The data, checked available for reading back; returns with the scheduler lock held.
const DataRun &readable_data(Run &run, DataIndex d, std::unique_lock<std::mutex> &lock) {
  lock = std::unique_lock(run.pool().scheduler().mu);
  const DataRun &data = run.data[d];
  const Graph &graph = run.graph();
  switch (data.phase) {
    case DataRun::Phase::kReady:
      return data;
    case DataRun::Phase::kPending:
      fail(GF_ERR_STATE, graph.data_label(d) + " is not produced yet");
    case DataRun::Phase::kNeverProduced:
      fail(GF_ERR_STATE, graph.data_label(d) + " was never produced: its producer " +
                             graph.task_label(graph.data(d).producer) + " failed or was cancelled");
    case DataRun::Phase::kFreed:
      fail(GF_ERR_STATE, graph.data_label(d) +
                             " was freed after its last consumer finished; mark it GF_DATA_KEEP "
                             "to read it back");
  }
  fail(GF_ERR_INTERNAL, "unknown data phase");
}

}  // namespace

extern "C" {

GF_API void gf_submit_options_init(gf_submit_options *options, uint32_t struct_size) {
  gf_submit_options init = GF_SUBMIT_OPTIONS_INIT;
  init_bounded(options, init, struct_size);
}

GF_API gf_status gf_graph_submit(gf_run **out, gf_pool *pool, gf_graph *graph,
                                 const gf_submit_options *options) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    gf_submit_options defaults = GF_SUBMIT_OPTIONS_INIT;
    gf_submit_options o = options ? read_struct(options, "gf_submit_options") : defaults;
    PoolCore &core = pool_of(pool);
    std::shared_ptr<Graph> g = graphs().find_shared(handle_bits(graph));
    if (!g) fail(GF_ERR_INVALID_HANDLE, "gf_graph is not a live handle (NULL or destroyed)");
    std::shared_ptr<Run> run = core.prepare(std::move(g), o);
    // The handle exists before the run starts: its completion callback may fire at once.
    uint64_t bits = runs().insert(run);
    run->set_handle(handle_from_bits<gf_run>(bits));
    try {
      core.scheduler().start(run);
    } catch (...) {
      runs().remove(bits);
      throw;
    }
    *out = handle_from_bits<gf_run>(bits);
    return GF_OK;
  });
}

GF_API gf_status gf_run_wait(gf_run *run, int64_t timeout_ms) {
  return guard([&] {
    Run &r = run_of(run);
    if (!r.wait_published(timeout_ms)) return GF_TIMEOUT;
    return outcome(r);
  });
}

GF_API gf_status gf_run_poll(gf_run *run) {
  return gf_run_wait(run, 0);
}

GF_API gf_status gf_run_state_get(gf_run_state *out, gf_run *run) {
  return guard([&] {
    require_out(out, "out");
    *out = run_of(run).state();
    return GF_OK;
  });
}

GF_API gf_status gf_run_fd(int *out, gf_run *run) {
  return guard([&] {
    require_out(out, "out");
    *out = run_of(run).completion_fd();
    return GF_OK;
  });
}

GF_API gf_status gf_run_cancel(gf_run *run) {
  return guard([&] {
    Run &r = run_of(run);
    r.pool().scheduler().cancel(r);
    return GF_OK;
  });
}

GF_API void gf_run_destroy(gf_run *run) {
  guard_void([&] {
    std::shared_ptr<Run> r = runs().remove(handle_bits(run));
    if (r) r->pool().scheduler().cancel(*r);
  });
}

GF_API gf_status gf_run_task_state(gf_task_state *out, gf_run *run, gf_task task) {
  return read_task(out, run, task, [](Run &, TaskIndex, const TaskRun &tr) { return tr.state; });
}

GF_API gf_status gf_run_task_error(const char **out, gf_run *run, gf_task task) {
  return read_task(out, run, task, [](Run &r, TaskIndex t, const TaskRun &tr) {
    auto it = r.errors.find(t);
    bool settled = tr.state == GF_TASK_FAILED || tr.state == GF_TASK_CANCELLED;
    // Errors of settled tasks never change again, so the string stays valid for the run's life.
    return settled && it != r.errors.end() ? it->second.c_str() : "";
  });
}

GF_API gf_status gf_run_task_attempts(uint32_t *out, gf_run *run, gf_task task) {
  return read_task(out, run, task, [](Run &, TaskIndex, const TaskRun &tr) { return tr.attempts; });
}

GF_API gf_status gf_run_task_worker(uint32_t *out, gf_run *run, gf_task task) {
  return read_task(out, run, task, [](Run &r, TaskIndex t, const TaskRun &tr) {
    if (tr.attempts == 0)
      fail(GF_ERR_STATE, r.graph().task_label(t) + " has not started on any worker");
    return tr.worker;
  });
}

GF_API gf_status gf_run_fetch(uint64_t *out_size, gf_run *run, gf_data data, void *dst,
                              uint64_t dst_capacity) {
  return guard([&] {
    require_out(out_size, "out_size");
    Run &r = run_of(run);
    DataIndex d = r.graph().data_index(data, "data");
    if (r.graph().data(d).kind != DataKind::kBuffer) {
      fail(GF_ERR_INVALID_ARGUMENT,
           r.graph().data_label(d) + " is an opaque value: read it with gf_run_value");
    }
    std::unique_lock<std::mutex> lock;
    const DataRun &state = readable_data(r, d, lock);
    *out_size = state.size;
    if (!dst) return GF_OK;
    if (dst_capacity < state.size) {
      fail(GF_ERR_INVALID_ARGUMENT, r.graph().data_label(d) + " has " + std::to_string(state.size) +
                                        " bytes; dst_capacity is " + std::to_string(dst_capacity));
    }
    // Readable data is kept until the run is destroyed, which cannot overlap this call, so the
    // replica stays valid after the lock is released.
    Replica source = state.replicas.front();
    uint64_t size = state.size;
    lock.unlock();
    r.pool().scheduler().backend().copy_sync(
        CopyRequest{source.space, source.ptr, kHostSpace, dst, size});
    return GF_OK;
  });
}

GF_API gf_status gf_run_value(void **out, gf_run *run, gf_data data) {
  return guard([&] {
    require_out(out, "out");
    Run &r = run_of(run);
    DataIndex d = r.graph().data_index(data, "data");
    if (r.graph().data(d).kind != DataKind::kValue) {
      fail(GF_ERR_INVALID_ARGUMENT,
           r.graph().data_label(d) + " is a buffer: read it with gf_run_fetch");
    }
    std::unique_lock<std::mutex> lock;
    *out = readable_data(r, d, lock).value;
    return GF_OK;
  });
}

GF_API gf_status gf_run_stats_get(gf_run_stats *out, gf_run *run) {
  return guard([&] {
    check_struct_size(out, "gf_run_stats");
    Run &r = run_of(run);
    std::lock_guard lock(r.pool().scheduler().mu);
    out->tasks = r.tasks.size();
    out->succeeded = r.succeeded;
    out->failed = r.failed;
    out->cancelled = r.cancelled;
    out->attempts = r.attempts;
    out->transfers = r.transfers;
    out->bytes_transferred = r.bytes_transferred;
    out->elapsed_s = seconds_between(r.submitted_at, r.finished ? r.finished_at : Clock::now());
    return GF_OK;
  });
}

}  // extern "C"
