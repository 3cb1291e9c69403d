#include "runtime/worker.hpp"

#include "core/clock.hpp"
#include "runtime/task_context.hpp"

namespace gf {

Worker::Worker(Scheduler &scheduler, WorkerState &state) : scheduler_(scheduler), state_(state) {}

Worker::~Worker() {
  join();
}

void Worker::start() {
  for (uint32_t i = 0; i < state_.threads; ++i) threads_.emplace_back([this] { thread_main(); });
}

void Worker::join() {
  for (auto &t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Worker::thread_main() {
  Batch batch;
  Deferred deferred;
  std::unique_lock lock(scheduler_.mu);
  while (scheduler_.next_batch(lock, state_, batch, deferred)) {
    lock.unlock();
    deferred.flush(scheduler_.backend());
    for (size_t i = 0; i < batch.count; ++i) execute(batch.items[i]);
    lock.lock();
  }
  lock.unlock();
  deferred.flush(scheduler_.backend());
}

void Worker::execute(Dispatch &dispatch) {
  if (dispatch.run->cancel_requested.load(std::memory_order_relaxed)) {
    dispatch.skipped = true;
    return;
  }
  gf_task_ctx ctx{&scheduler_, &state_, &dispatch, {}, false};
  const TaskBody &body = dispatch.run->body(dispatch.task);
  auto start = Clock::now();
  int rc;
  try {
    rc = state_.kind == GF_WORKER_CPU
             ? body.cpu_fn(&ctx, body.user_data)
             : scheduler_.backend().run_gpu_body(state_.device, body.gpu_fn, &ctx, body.user_data);
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
}

}  // namespace gf
