#include "runtime/worker.hpp"

#include "core/clock.hpp"
#include "pool/pool_core.hpp"
#include "runtime/task_context.hpp"

namespace gf {

Worker::Worker(Scheduler &scheduler, WorkerState &state) : scheduler_(scheduler), state_(state) {}

Worker::~Worker() {
  join();
}

void Worker::start() {
  for (uint32_t i = 0; i < state_.threads; ++i) {
    threads_.emplace_back([this, i] { thread_main(i); });
  }
}

void Worker::join() {
  for (auto &t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Worker::thread_main(uint32_t thread) {
  void *stream = state_.kind == GF_WORKER_GPU
                     ? scheduler_.backend().bind_thread(state_.device, thread)
                     : nullptr;
  Batch batch;
  Deferred deferred;
  std::unique_lock lock(scheduler_.mu);
  while (scheduler_.next_batch(lock, state_, batch, deferred)) {
    lock.unlock();
    deferred.flush(scheduler_.backend());
    for (size_t i = 0; i < batch.count; ++i) execute(batch.items[i], stream);
    lock.lock();
  }
  lock.unlock();
  deferred.flush(scheduler_.backend());
}

void Worker::execute(Dispatch &dispatch, void *stream) {
  if (dispatch.run->cancel_requested.load(std::memory_order_relaxed)) {
    dispatch.skipped = true;
    return;
  }
  gf_task_ctx ctx{&scheduler_, &state_, &dispatch, {}, false, stream};
  const TaskBody &body = dispatch.run->body(dispatch.task);
  EventHub &events = dispatch.run->pool().events();
  if (events.active()) emit_task_event(dispatch, GF_EVENT_TASK_STARTED, events);
  auto start = Clock::now();
  int rc;
  try {
    rc = state_.kind == GF_WORKER_CPU
             ? body.cpu_fn(&ctx, body.user_data)
             : scheduler_.backend().run_gpu_body(state_.device, body.gpu_fn, &ctx, body.user_data);
  } catch (const std::exception &e) {
    rc = -1;
    ctx.failed = true;
    ctx.error = std::string("the body threw a C++ exception: ") + e.what();
  } catch (...) {
    rc = -1;
    ctx.failed = true;
    ctx.error = "the body threw a C++ exception (bodies must not throw)";
  }
  dispatch.seconds = seconds_between(start, Clock::now());
  dispatch.ok = rc == 0 && !ctx.failed;
  if (!dispatch.ok) {
    dispatch.error = ctx.failed ? std::move(ctx.error)
                                : "the body returned " + std::to_string(rc) +
                                      " without a message (gf_task_ctx_fail)";
  }
  if (state_.kind == GF_WORKER_CPU) {
    if (events.active()) emit_task_event(dispatch, GF_EVENT_TASK_FINISHED, events);
    return;
  }
  // The body only enqueued its work: the task is done when the stream is, whatever the body
  // returned (its outputs must not be released while kernels may still write them).
  auto handed = std::make_shared<Dispatch>(std::move(dispatch));
  dispatch = Dispatch{};
  dispatch.handed_off = true;
  scheduler_.backend().after_stream(
      state_.device, stream, [this, handed, start, &events](const std::string &device_error) {
        handed->seconds = seconds_between(start, Clock::now());
        if (events.active()) emit_task_event(*handed, GF_EVENT_TASK_FINISHED, events);
        scheduler_.finish_async(state_, *handed, device_error);
      });
}

void Worker::emit_task_event(const Dispatch &dispatch, gf_event_kind kind, EventHub &events) {
  const Run &run = *dispatch.run;
  gf_event event{};
  event.kind = kind;
  event.run = run.handle();
  event.task = run.graph().task_ref(dispatch.task);
  event.worker = state_.index;
  event.attempt = dispatch.attempt;
  event.ok = kind == GF_EVENT_TASK_FINISHED && dispatch.ok ? 1 : 0;
  event.time_s = events.now_s();
  event.task_name = run.graph().task(dispatch.task).name.c_str();
  events.emit(event);
}

}  // namespace gf
