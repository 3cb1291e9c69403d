#include "pool/service_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/request_bounds.hpp"
#include "pool/pool_core.hpp"
#include "serialize/serialize.hpp"
#include "wire/framing.hpp"
#include "wire/records.hpp"

namespace gf {

ServiceRun::ServiceRun(std::shared_ptr<PoolCore> pool, std::shared_ptr<Graph> graph)
    : PublishedRun(pool->scheduler()),
      pool_(std::move(pool)),
      connection_(pool_->connection()),
      graph_(std::move(graph)),
      tasks_(graph_->task_count()) {}

ServiceRun::~ServiceRun() = default;

void ServiceRun::start() {
  graph_->freeze();
  char directory[PATH_MAX];
  std::string cwd = ::getcwd(directory, sizeof directory) ? directory : "";
  // Where this process's commands would log (GPUFLOW_LOG_DIR), for the service's to log there.
  std::string log_dir;
  if (const char *env = std::getenv("GPUFLOW_LOG_DIR"); env && *env) {
    log_dir = env[0] == '/' || cwd.empty() ? env : cwd + "/" + env;
  }
  if (!graph_->has_commands()) cwd.clear(), log_dir.clear();  // nothing would start there
  // The service takes no directory past gpuflow.h's bound: refused here, before anything is sent.
  for (const auto &[what, dir] :
       {std::pair<const char *, const std::string *>{"the working directory", &cwd},
        {"the log directory (GPUFLOW_LOG_DIR)", &log_dir}}) {
    const std::string why =
        bounds::text_problem(what, *dir, "GF_MAX_PATH_BYTES", bounds::kMaxPathBytes);
    if (!why.empty()) fail(GF_ERR_INVALID_ARGUMENT, "a graph run in the service: " + why);
  }
  const std::string document = serialize::to_binary(*graph_);
  const uint64_t blob = connection_->blobs().next_blob_id();
  connection_->blobs().put(blob, document.data(), document.size());
  run_id_ = connection_->runs().next_run_id();
  started_ = std::chrono::steady_clock::now();
  // The run keeps itself alive until the service says it ended (or the connection does), so its
  // blobs are always dropped, even when the caller let go of it first. The callback holds no
  // reference: the last one must never go on the connection's reader thread, whose end it is.
  keep_alive_ = shared_from_this();
  // The task count it answers is the graph's (tasks_); the report is checked against the graph.
  try {
    connection_->runs().submit_graph(
        run_id_, blob, cwd, log_dir,
        [this](const std::vector<uint8_t> *payload, const std::string &why) {
          finished(payload, why);
        },
        [this](const std::vector<uint8_t> &payload) {
          const wire::RunProgress *p = wire::message_of(payload)->body_as_RunProgress();
          std::lock_guard lock(mu_);
          progress_ = {tasks_, p->succeeded(), p->failed(), p->cancelled(), p->attempts(), 0, 0, 0};
        });
  } catch (...) {
    keep_alive_.reset();  // refused: `finished` never runs
    throw;
  }
}

gf_run_state ServiceRun::state() {
  std::lock_guard lock(mu_);
  return state_;
}

void ServiceRun::cancel() {
  if (state() == GF_RUN_RUNNING) connection_->runs().cancel_run(run_id_);
}

void ServiceRun::release(std::function<void()> forget) {
  bool ended;
  {
    std::lock_guard lock(mu_);
    released_ = true;
    ended = state_ != GF_RUN_RUNNING;
  }
  if (ended) {
    forget_blobs();
  } else {
    connection_->runs().cancel_run(run_id_);  // its blobs go when RunFinished comes (finished())
  }
  forget_after_callback(std::move(forget), ended);
}

void ServiceRun::finished(const std::vector<uint8_t> *payload, const std::string &why) {
  gf_run_state state = GF_RUN_FAILED;
  std::string summary;
  RunStats snapshot{};
  snapshot.tasks = tasks_;
  Output report;
  const wire::RunFinished *f =
      payload ? wire::message_of(*payload)->body_as_RunFinished() : nullptr;
  if (!f) {
    summary = why;
    snapshot.failed = tasks_;
  } else {
    state = static_cast<gf_run_state>(f->state());
    summary = wire::str(f->summary());
    snapshot = {
        f->tasks(),     f->succeeded(),         f->failed(),   f->cancelled(), f->attempts(),
        f->transfers(), f->bytes_transferred(), f->elapsed_s()};
    report = {f->report_blob(), f->report_size()};
    if (state != GF_RUN_SUCCEEDED && state != GF_RUN_FAILED && state != GF_RUN_CANCELLED) {
      summary = "the service at " + connection_->endpoint() + " ended the run in state " +
                std::to_string(static_cast<int>(state));
      state = GF_RUN_FAILED;
    }
  }
  bool released;
  {
    std::lock_guard lock(mu_);
    state_ = state;
    summary_ = summary;
    snapshot_ = snapshot;
    report_ = report;
    released = released_;
  }
  if (released) forget_blobs();
  // Published off the connection's reader thread: the caller's completion callback may fetch
  // outputs, and a fetch waits for that thread.
  finish_on_thread(std::move(keep_alive_), [](ServiceRun &run) { run.completion_.publish(); });
}

void ServiceRun::forget_blobs() {
  std::vector<uint64_t> blobs;
  {
    std::lock_guard lock(mu_);
    if (report_.blob) blobs.push_back(report_.blob);  // the service drops its outputs with it
    outputs_.clear();
    report_ = {};
  }
  for (uint64_t blob : blobs) connection_->blobs().forget_blob(blob);
}

void ServiceRun::load_report(std::unique_lock<std::mutex> &lock) {
  // One thread fetches; the others wait for it rather than read a report half there.
  report_fetched_.wait(lock, [&] { return !report_fetching_; });
  if (report_loaded_) return;
  const uint64_t tasks = graph_->task_count();
  if (!report_.blob) {
    report_loaded_ = true;
    report_error_ = "the service sent no per-task report" +
                    (summary_.empty() ? std::string() : " (" + summary_ + ")");
    return;
  }
  report_fetching_ = true;
  const Output report = report_;
  lock.unlock();
  std::vector<uint8_t> bytes;
  std::string error;
  try {
    bytes = connection_->blobs().get(report.blob);
  } catch (const std::exception &e) {
    error = std::string("the per-task report could not be fetched: ") + e.what();
  }
  lock.lock();
  report_fetching_ = false;
  report_loaded_ = true;
  report_fetched_.notify_all();  // they look once this thread lets go of the lock
  if (!error.empty()) {
    report_error_ = error;
    return;
  }
  // One table per failure and per output, besides the root: a cancelled million-task run has a
  // million failures, past the Verifier's default of a million tables.
  const uint64_t tables = bytes.size() / 4 + 16;
  flatbuffers::Verifier verifier(
      bytes.data(), bytes.size(), 64,
      static_cast<flatbuffers::uoffset_t>(std::min<uint64_t>(tables, UINT32_MAX)));
  const auto *r = verifier.VerifyBuffer<wire::RunReport>(nullptr)
                      ? flatbuffers::GetRoot<wire::RunReport>(bytes.data())
                      : nullptr;
  if (!r || !r->states() || r->states()->size() != tasks || !r->attempts() ||
      r->attempts()->size() != tasks || !r->workers() || r->workers()->size() != tasks) {
    report_error_ = "the service's per-task report is malformed";
    return;
  }
  task_states_.assign(r->states()->begin(), r->states()->end());
  task_attempts_.assign(r->attempts()->begin(), r->attempts()->end());
  task_workers_.assign(r->workers()->begin(), r->workers()->end());
  if (r->failures()) {
    for (const wire::TaskFailure *f : *r->failures()) {
      if (f->task() < tasks) task_errors_[f->task()] = wire::str(f->error());
    }
  }
  if (r->outputs()) {
    for (const wire::RunOutput *o : *r->outputs()) {
      if (o->data() >= graph_->data_count() || graph_->data(o->data()).kind != DataKind::kBuffer) {
        report_error_ = "the service's per-task report lists output " + std::to_string(o->data()) +
                        ", which is no buffer of this graph";
        return;
      }
      outputs_[o->data()] = {o->blob_id(), o->size()};
    }
  }
}

TaskRecord ServiceRun::task(TaskIndex t) {
  std::unique_lock lock(mu_);
  if (state_ == GF_RUN_RUNNING) return {GF_TASK_WAITING, 0, UINT32_MAX, ""};
  load_report(lock);
  if (!report_error_.empty()) fail(GF_ERR_SYSTEM, report_error_);
  auto error = task_errors_.find(t);
  return {static_cast<gf_task_state>(task_states_[t]), task_attempts_[t], task_workers_[t],
          error == task_errors_.end() ? "" : error->second.c_str()};
}

RunStats ServiceRun::snapshot() {
  std::lock_guard lock(mu_);
  if (state_ != GF_RUN_RUNNING) return snapshot_;
  RunStats running = progress_;  // as the service last told (every 250 ms)
  running.tasks = tasks_;
  running.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return running;
}

std::string ServiceRun::failure_summary() {
  std::lock_guard lock(mu_);
  return summary_.empty() ? "no task failed" : summary_;
}

uint64_t ServiceRun::read_buffer(DataIndex d, void *dst, uint64_t capacity) {
  const DataDesc &data = graph_->data(d);
  std::unique_lock lock(mu_);
  Output output;
  if (data.origin == DataOrigin::kHostBuffer) {
    output.size = data.size;  // the caller's own bytes: no need to ask the service
  } else if (state_ == GF_RUN_RUNNING) {
    fail(GF_ERR_STATE,
         graph_->data_label(d) + " is not produced yet (the run is still running in the service)");
  } else {
    load_report(lock);  // it lists the outputs
    if (!report_error_.empty() && state_ != GF_RUN_SUCCEEDED) {
      fail(GF_ERR_STATE, graph_->data_label(d) + " was never produced: " + summary_);
    }
    if (!report_error_.empty()) {
      fail(GF_ERR_SYSTEM, graph_->data_label(d) + " cannot be read: " + report_error_);
    }
    if (auto it = outputs_.find(d); it != outputs_.end()) {
      output = it->second;
    } else if (task_states_[data.producer] != GF_TASK_SUCCEEDED) {
      fail(GF_ERR_STATE, graph_->data_label(d) + " was never produced: its producer " +
                             graph_->task_label(data.producer) + " failed or was cancelled");
    } else {
      fail(GF_ERR_STATE, graph_->data_label(d) +
                             " was freed after its last consumer finished; mark it GF_DATA_KEEP "
                             "to read it after the run");
    }
  }
  lock.unlock();
  if (!dst) return output.size;
  if (capacity < output.size) {
    fail(GF_ERR_INVALID_ARGUMENT, graph_->data_label(d) + " has " + std::to_string(output.size) +
                                      " bytes; dst_capacity is " + std::to_string(capacity));
  }
  if (data.origin == DataOrigin::kHostBuffer) {
    if (output.size) std::memcpy(dst, data.host_bytes, output.size);
    return output.size;
  }
  std::vector<uint8_t> bytes = connection_->blobs().get(output.blob);
  if (bytes.size() != output.size) {
    fail(GF_ERR_SYSTEM, "the service at " + connection_->endpoint() + " sent " +
                            std::to_string(bytes.size()) + " bytes for " + graph_->data_label(d) +
                            ", which has " + std::to_string(output.size));
  }
  if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
  return output.size;
}

void *ServiceRun::read_value(DataIndex d) {
  fail(GF_ERR_INVALID_ARGUMENT, graph_->data_label(d) +
                                    " is an opaque value of a run in the service: values stay "
                                    "there (submit with GF_RUN_IN_PROCESS to read them)");
}

}  // namespace gf
