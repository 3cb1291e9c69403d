#include "transport/uv_progress.hpp"

#include "core/error.hpp"

namespace gf::transport {

UvProgress::UvProgress(uv_loop_t *loop, Worker &worker) : worker_(worker) {
  if (int rc = uv_poll_init(loop, &poll_, worker.event_fd())) {
    fail(GF_ERR_SYSTEM, std::string("polling UCX's wake-up descriptor: ") + uv_strerror(rc));
  }
  poll_.data = this;
  uv_prepare_init(loop, &prepare_);
  prepare_.data = this;
  uv_timer_init(loop, &timer_);
  timer_.data = this;
  uv_poll_start(&poll_, UV_READABLE,
                [](uv_poll_t *h, int, int) { static_cast<UvProgress *>(h->data)->progress(); });
  uv_prepare_start(&prepare_,
                   [](uv_prepare_t *h) { static_cast<UvProgress *>(h->data)->progress(); });
  // The prepare handle alone must not keep the loop alive.
  uv_unref(reinterpret_cast<uv_handle_t *>(&prepare_));
  uv_unref(reinterpret_cast<uv_handle_t *>(&poll_));
}

UvProgress::~UvProgress() = default;

void UvProgress::progress() {
  // Never re-entered: completions and error callbacks run inside ucp_worker_progress, and UCX
  // aborts on a nested call. What they post is progressed by the prepare handle before the loop
  // sleeps.
  if (closed_ || progressing_) return;
  progressing_ = true;
  struct Reset {
    bool &flag;
    ~Reset() { flag = false; }
  } reset{progressing_};
  // Arming fails with BUSY while events are pending: progress until it succeeds, so the loop
  // only sleeps with the descriptor armed. Bounded, so a stream of events cannot starve the
  // loop's other clients: the prepare handle comes back before the next sleep.
  for (int i = 0; i < 64; ++i) {
    if (worker_.progress_and_arm()) return;
  }
}

void UvProgress::kick() {
  progress();
}

void UvProgress::started() {
  ++outstanding_;
  if (timer_on_ || closed_) return;
  timer_on_ = true;
  uv_timer_start(
      &timer_, [](uv_timer_t *h) { static_cast<UvProgress *>(h->data)->progress(); }, kFallbackMs,
      kFallbackMs);
}

void UvProgress::ended() {
  if (outstanding_ > 0) --outstanding_;
  if (outstanding_ == 0 && timer_on_) {
    timer_on_ = false;
    uv_timer_stop(&timer_);
  }
}

void UvProgress::close() {
  if (closed_) return;
  closed_ = true;
  uv_close(reinterpret_cast<uv_handle_t *>(&poll_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t *>(&prepare_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t *>(&timer_), nullptr);
}

}  // namespace gf::transport
