// Drives a worker from a libuv loop without busy waiting. Three handles:
//  - a uv_poll_t on the worker's wake-up descriptor, armed with ucp_worker_arm;
//  - a uv_prepare_t that progresses and re-arms before the loop sleeps, since work posted by
//    this loop's own callbacks (a send, a receive) needs progress no descriptor announces;
//  - a uv_timer_t that progresses every kFallbackMs while operations are outstanding: UCX's
//    wake-up descriptor alone is known to miss some wire-up events, and this cannot miss them.
// An idle worker costs nothing: the timer stops when nothing is outstanding.
#pragma once

#include <uv.h>

#include <cstddef>

#include "transport/ucx_context.hpp"

namespace gf::transport {

class UvProgress {
 public:
  static constexpr uint64_t kFallbackMs = 2;

  UvProgress(uv_loop_t *loop, Worker &worker);
  ~UvProgress();  // the handles must have been closed (close()) and the loop run since
  UvProgress(const UvProgress &) = delete;
  UvProgress &operator=(const UvProgress &) = delete;

  // An operation was posted / finished: the fallback timer runs while any is outstanding.
  void started();
  void ended();
  size_t outstanding() const { return outstanding_; }
  // Progresses now (after posting work from a loop callback); inside a UCX callback, nothing.
  void kick();
  // Closes the three handles (uv_close); the worker is progressed no more from the loop.
  void close();

 private:
  void progress();
  Worker &worker_;
  uv_poll_t poll_{};
  uv_prepare_t prepare_{};
  uv_timer_t timer_{};
  size_t outstanding_ = 0;
  bool timer_on_ = false;
  bool closed_ = false;
  bool progressing_ = false;
};

}  // namespace gf::transport
