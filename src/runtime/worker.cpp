#include "runtime/worker.hpp"

#include <cxxabi.h>

#include "core/clock.hpp"
#include "runtime/task_context.hpp"

namespace gf {
namespace {

thread_local Worker *current_worker = nullptr;
thread_local const Scheduler *current_scheduler = nullptr;
// The thread's context, read when a body waits (running_run); execute() writes its `running`
// without reaching the thread-local (from a shared library, a call per access).
thread_local const Worker::ThreadContext *current_context = nullptr;

}  // namespace

bool Worker::on_thread_of(const Scheduler &scheduler) {
  return current_scheduler == &scheduler;
}

const RunState *Worker::running_run() {
  return current_context ? current_context->running : nullptr;
}

Worker::Worker(Scheduler &scheduler, WorkerState &state, EventHub &events)
    : scheduler_(scheduler), state_(state), events_(events) {}

Worker::~Worker() {
  join();
}

void Worker::start() {
  std::lock_guard lock(threads_mu_);
  for (uint32_t i = 0; i < state_.threads; ++i) spawn_locked();
}

void Worker::spawn_locked() {
  auto index = static_cast<uint32_t>(threads_.size());
  threads_.push_back(Thread{std::thread([this, index] { thread_main(index); })});
}

void Worker::join() {
  std::vector<Thread> threads;
  {
    std::lock_guard lock(threads_mu_);
    joining_ = true;
    threads.swap(threads_);
  }
  for (auto &t : threads) {
    if (t.thread.joinable()) t.thread.join();
  }
}

bool Worker::take_retirement() {
  int n = retire_.load(std::memory_order_relaxed);
  while (n > 0) {
    if (retire_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

void Worker::thread_main(uint32_t thread) {
  current_worker = this;
  current_scheduler = &scheduler_;
  // Spare threads share the streams of the worker's regular ones.
  ThreadContext context;
  context.stream = state_.kind == GF_WORKER_GPU
                       ? scheduler_.backend().bind_thread(state_.device, thread % state_.threads)
                       : nullptr;
  current_context = &context;
  Batch batch;
  Deferred deferred;
  for (;;) {
    if (take_retirement()) {  // a wait that stepped aside is over: one thread too many
      scheduler_.retire_thread(state_, batch, deferred);
      break;
    }
    bool more = scheduler_.next_batch(state_, batch, deferred);
    deferred.flush(scheduler_.backend());
    if (!more) break;
    run_batch(batch, context);
  }
  deferred.flush(scheduler_.backend());
  current_context = nullptr;
  std::lock_guard threads_lock(threads_mu_);
  for (Thread &t : threads_) {
    if (t.thread.get_id() == std::this_thread::get_id()) t.exited = true;
  }
}

void Worker::run_batch(Batch &batch, ThreadContext &thread) {
  if (batch.count == 0) return;
  // The clock is read at task boundaries only (a body's end is the next one's start) where each
  // task's own times are reported: GPU bodies, listeners, measured queue waits. Otherwise once
  // per row of tasks sharing a cost key, each charged the row's average, which is all that
  // duration estimates learn from (profiled: two readings per task were 9 % of a no-op run).
  const bool per_task = state_.kind != GF_WORKER_CPU || events_.active() ||
                        batch.items[0].ready_at != Clock::time_point{};
  // Tasks known to be tiny are timed one batch in kTimedEvery (a chain of no-op tasks spent a
  // third of its time reading the clock); their estimates learn from those batches alone.
  bool tiny = !per_task;
  for (size_t i = 0; tiny && i < batch.count; ++i) tiny = batch.items[i].tiny;
  if (tiny && ++batch.untimed < kTimedEvery) {
    for (size_t i = 0; i < batch.count; ++i) {  // count grows as successors are run directly
      execute(batch.items[i], thread, Clock::time_point{}, false);
      batch.items[i].timed = false;
      DirectRuns::after_success(state_, batch, i);
      Scheduler::prefetch_settling(batch.items[i]);
    }
    return;
  }
  batch.untimed = 0;
  Clock::time_point at = Clock::now();
  size_t row = 0;
  for (size_t i = 0; i < batch.count; ++i) {
    at = execute(batch.items[i], thread, at, per_task);
    if (!per_task) DirectRuns::after_success(state_, batch, i);
    Scheduler::prefetch_settling(batch.items[i]);
    if (per_task || (i + 1 < batch.count && same_cost(batch.items[i], batch.items[i + 1]))) {
      continue;
    }
    const Clock::time_point end = Clock::now();
    size_t ran = 0;
    for (size_t k = row; k <= i; ++k)
      ran += batch.items[k].outcome == TaskAttempt::Outcome::kNotRun ? 0 : 1;
    const double each = ran ? seconds_between(at, end) / static_cast<double>(ran) : 0.0;
    for (size_t k = row; k <= i; ++k) batch.items[k].seconds = each;
    at = end;
    row = i + 1;
  }
  if (state_.kind == GF_WORKER_CPU && events_.active()) emit_finished(batch);
}

bool Worker::same_cost(const TaskAttempt &a, const TaskAttempt &b) {
  auto id = [](const TaskAttempt &d) {
    const RunState &run = *d.run;
    return run.cost_ids[run.graph().task(d.task).cost_key];
  };
  return id(a) == id(b);
}

StepAside::StepAside(const Scheduler &scheduler) {
  if (!current_worker || current_scheduler != &scheduler) return;
  Worker &w = *current_worker;
  std::lock_guard lock(w.threads_mu_);
  if (w.joining_) return;  // the pool is shutting down: the awaited run is being cancelled
  // Threads retired earlier are joined here, so spare threads never pile up.
  std::erase_if(w.threads_, [](Worker::Thread &t) {
    if (!t.exited) return false;
    t.thread.join();
    return true;
  });
  w.spawn_locked();
  worker_ = &w;
}

StepAside::~StepAside() {
  if (worker_) worker_->retire_.fetch_add(1, std::memory_order_relaxed);
}

Clock::time_point Worker::execute(TaskAttempt &attempt, ThreadContext &thread,
                                  Clock::time_point start, bool timed) {
  const Graph &graph = attempt.run->graph();
  const TaskDesc &desc = graph.task(attempt.task);
  attempt.clear_results(desc.output_count);
  if (attempt.run->cancel_requested.load(std::memory_order_relaxed)) {
    attempt.outcome = TaskAttempt::Outcome::kNotRun;
    return start;
  }
  gf_task_ctx ctx{&scheduler_, &state_, &attempt, {}, false, thread.stream};
  thread.running = attempt.run;
  const TaskBody &body = attempt.run->body(attempt.task);
  EventHub &events = events_;
  if (attempt.ready_at != Clock::time_point{})
    attempt.queue_wait_s = seconds_between(attempt.ready_at, start);
  if (events.has_subscriber()) emit_task_event(attempt, GF_EVENT_TASK_STARTED, events, start);
  int rc;
  try {
    if (state_.kind == GF_WORKER_CPU) {
      rc = body.cpu_fn(&ctx, body.user_data);
    } else {
      GpuBodyResult r =
          scheduler_.backend().run_gpu_body(state_.device, body.gpu_fn, &ctx, body.user_data);
      rc = r.rc;
      // A launch the device refused fails the task, unless the body already said why it failed.
      if (!r.device_error.empty() && !ctx.failed) {
        ctx.failed = true;
        ctx.error = std::move(r.device_error);
      }
    }
  } catch (abi::__forced_unwind &) {
    // The thread is being ended (pthread_exit, or an interpreter finalizing while a body still
    // runs): the unwind must go on, or the C library aborts the process.
    throw;
  } catch (const std::exception &e) {
    rc = -1;
    ctx.failed = true;
    ctx.error = std::string("the body threw a C++ exception: ") + e.what();
  } catch (...) {
    rc = -1;
    ctx.failed = true;
    ctx.error = "the body threw a C++ exception (bodies must not throw)";
  }
  thread.running = nullptr;
  attempt.outcome =
      rc == 0 && !ctx.failed ? TaskAttempt::Outcome::kSucceeded : TaskAttempt::Outcome::kFailed;
  if (!attempt.succeeded()) {
    attempt.error = ctx.failed ? std::move(ctx.error)
                               : "the body returned " + std::to_string(rc) +
                                     " without a message (gf_task_ctx_fail)";
  } else {
    const DataIndex *out = graph.outputs(desc);
    for (uint32_t i = 0; i < desc.output_count; ++i) {
      if (!attempt.outputs[i].set) {
        attempt.outcome = TaskAttempt::Outcome::kFailed;
        attempt.error = "returned success without producing " + graph.data_label(out[i]) +
                        " (call gf_task_ctx_output or gf_task_ctx_set_value)";
        break;
      }
    }
  }
  if (state_.kind == GF_WORKER_CPU) {
    if (!timed) {  // run_batch charges the row's time; nothing listens for the finish
      attempt.ended_at = {};
      return start;
    }
    const auto end = Clock::now();
    attempt.seconds = seconds_between(start, end);
    attempt.ended_at = end;  // reported with the rest of the batch (emit_finished)
    return end;
  }
  const auto end = Clock::now();
  attempt.seconds = seconds_between(start, end);
  // The body only enqueued its work: the task is done when the stream is, whatever the body
  // returned (its outputs must not be released while kernels may still write them).
  auto handed = std::make_shared<TaskAttempt>(std::move(attempt));
  attempt = TaskAttempt{};
  attempt.outcome = TaskAttempt::Outcome::kHandedOff;
  scheduler_.backend().after_stream(
      state_.device, thread.stream,
      [this, handed, start, &events](const std::string &device_error) {
        const auto done = Clock::now();
        handed->seconds = seconds_between(start, done);
        if (EventTap *tap = events.tap()) {
          const FinishedTask record = finished_task(*handed, done);
          tap->on_finished(&record, 1);
        }
        if (events.has_subscriber()) emit_task_event(*handed, GF_EVENT_TASK_FINISHED, events, done);
        scheduler_.finish_async(state_, *handed, device_error);
      });
  return end;
}

void Worker::emit_finished(const Batch &batch) {
  // A batch holds only cheap tasks (or one): reporting their finishes together costs the
  // listeners one call, and the dashboard one lock, per batch instead of per task.
  constexpr size_t kChunk = 16;
  EventTap *tap = events_.tap();
  const bool subscriber = events_.has_subscriber();
  FinishedTask records[kChunk];
  gf_event events[kChunk];
  size_t n = 0;
  auto deliver = [&] {
    if (tap) tap->on_finished(records, n);
    if (subscriber) events_.emit_batch(events, n);
    n = 0;
  };
  for (size_t i = 0; i < batch.count; ++i) {
    const TaskAttempt &d = batch.items[i];
    if (d.outcome == TaskAttempt::Outcome::kNotRun ||
        d.outcome == TaskAttempt::Outcome::kHandedOff || d.ended_at == Clock::time_point{}) {
      continue;
    }
    if (tap) records[n] = finished_task(d, d.ended_at);
    if (subscriber) events[n] = task_event(d, GF_EVENT_TASK_FINISHED, events_, d.ended_at);
    if (++n == kChunk) deliver();
  }
  if (n) deliver();
}

FinishedTask Worker::finished_task(const TaskAttempt &attempt, Clock::time_point at) const {
  const RunState &run = *attempt.run;
  const TaskDesc &task = run.graph().task(attempt.task);
  FinishedTask record;
  record.worker = state_.index;
  // The name only where the label needs it: it lies on another cache line than the key.
  record.cost_id = task.explicit_cost_key ? FinishedTask::kNoCostId : run.cost_ids[task.cost_key];
  record.name = task.explicit_cost_key ? run.graph().task_name(task).c_str() : nullptr;
  record.ok = attempt.succeeded();
  record.end_s = events_.time_s(at);
  record.duration_s = attempt.seconds;
  record.queue_wait_s = attempt.queue_wait_s;
  return record;
}

void Worker::emit_task_event(const TaskAttempt &attempt, gf_event_kind kind, EventHub &events,
                             Clock::time_point at) {
  gf_event event = task_event(attempt, kind, events, at);
  events.emit(event);
}

gf_event Worker::task_event(const TaskAttempt &attempt, gf_event_kind kind, const EventHub &events,
                            Clock::time_point at) const {
  const RunState &run = *attempt.run;
  gf_event event{};
  event.kind = kind;
  event.run = run.handle;
  event.task = run.graph().task_ref(attempt.task);
  event.worker = state_.index;
  event.attempt = attempt.attempt;
  event.ok = kind == GF_EVENT_TASK_FINISHED && attempt.succeeded() ? 1 : 0;
  event.time_s = events.time_s(at);
  event.task_name = run.graph().task_name(run.graph().task(attempt.task)).c_str();
  event.duration_s = kind == GF_EVENT_TASK_FINISHED ? attempt.seconds : 0.0;
  event.queue_wait_s = attempt.queue_wait_s;
  return event;
}

}  // namespace gf
