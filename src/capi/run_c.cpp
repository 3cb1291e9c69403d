// C shims: everything a caller does with a run (gf_graph_submit, in graph_c.cpp, makes one).
#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

TaskIndex task_of(Run &run, gf_task task) {
  return run.graph().task_index(task, "task");
}

TaskRecord task_record(gf_run *run, gf_task task) {
  Run &r = run_of(run);
  return r.task(task_of(r, task));
}

// The outcome of a finished run as a status, with a message naming the first failure.
gf_status outcome(Run &run) {
  switch (run.state()) {
    case GF_RUN_SUCCEEDED:
      return GF_OK;
    case GF_RUN_CANCELLED:
      fail(GF_ERR_CANCELLED, "the run was cancelled");
    case GF_RUN_FAILED:
      fail(GF_ERR_TASK_FAILED, run.failure_summary());
    default:
      break;
  }
  return GF_TIMEOUT;
}

}  // namespace

extern "C" {

GF_API gf_status gf_run_where_get(gf_run_where *out, gf_run *run) {
  return guard([&] {
    require_out(out, "out");
    *out = run_of(run).where();
    return GF_OK;
  });
}

GF_API gf_status gf_run_wait(gf_run *run, int64_t timeout_ms) {
  return guard([&] {
    Run &r = run_of(run);
    if (!r.wait(timeout_ms)) return GF_TIMEOUT;
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
    *out = run_of(run).fd();
    return GF_OK;
  });
}

GF_API gf_status gf_run_cancel(gf_run *run) {
  return guard([&] {
    run_of(run).cancel();
    return GF_OK;
  });
}

GF_API void gf_run_destroy(gf_run *run) {
  guard_void([&] {
    const uint64_t bits = handle_bits(run);
    std::shared_ptr<Run> r = runs().find_shared(bits);
    if (!r) return;
    r->release([bits] { runs().remove(bits); });
  });
}

GF_API gf_status gf_run_task_state(gf_task_state *out, gf_run *run, gf_task task) {
  return guard([&] {
    require_out(out, "out");
    *out = task_record(run, task).state;
    return GF_OK;
  });
}

GF_API gf_status gf_run_task_error(const char **out, gf_run *run, gf_task task) {
  return guard([&] {
    require_out(out, "out");
    *out = task_record(run, task).error;
    return GF_OK;
  });
}

GF_API gf_status gf_run_task_attempts(uint32_t *out, gf_run *run, gf_task task) {
  return guard([&] {
    require_out(out, "out");
    *out = task_record(run, task).attempts;
    return GF_OK;
  });
}

GF_API gf_status gf_run_task_worker(uint32_t *out, gf_run *run, gf_task task) {
  return guard([&] {
    require_out(out, "out");
    const TaskRecord record = task_record(run, task);
    if (record.attempts == 0) {
      Run &r = run_of(run);
      fail(GF_ERR_STATE, r.graph().task_label(task_of(r, task)) + " has not started on any worker");
    }
    *out = record.worker;
    return GF_OK;
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
    *out_size = r.read_buffer(d, dst, dst_capacity);
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
    *out = r.read_value(d);
    return GF_OK;
  });
}

GF_API gf_status gf_run_stats_get(gf_run_stats *out, gf_run *run) {
  return guard([&] {
    checked_size(out, "gf_run_stats");
    Run &r = run_of(run);
    const RunStats snapshot = r.snapshot();
    gf_run_stats stats = GF_RUN_STATS_INIT;
    stats.tasks = snapshot.tasks;
    stats.succeeded = snapshot.succeeded;
    stats.failed = snapshot.failed;
    stats.cancelled = snapshot.cancelled;
    stats.attempts = snapshot.attempts;
    stats.transfers = snapshot.transfers;
    stats.bytes_transferred = snapshot.bytes_transferred;
    stats.elapsed_s = snapshot.elapsed_s;
    write_struct(out, stats, "gf_run_stats");
    return GF_OK;
  });
}

}  // extern "C"
