// A client's worker, owned by one thread that sleeps in poll(2) on the worker's wake-up
// descriptor and its own eventfd, with a short timeout while operations are outstanding (the
// same fallback as the service's timer: the descriptor alone can miss wire-up events). Other
// threads never touch the worker: they post functions that run on this thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "transport/ucx_context.hpp"

namespace gf::transport {

class ProgressThread {
 public:
  static constexpr int kFallbackMs = 2;  // poll timeout while operations are outstanding
  static constexpr int kIdleMs = 200;    // and while none is

  // Takes the worker; starts the thread. Throws gf::Error when the eventfd cannot be made.
  explicit ProgressThread(std::unique_ptr<Worker> worker);
  ~ProgressThread();  // stop(); the worker goes with it
  // Runs what is posted, then `on_stop`, then ends the thread. Idempotent; not from the thread.
  void stop();
  ProgressThread(const ProgressThread &) = delete;
  ProgressThread &operator=(const ProgressThread &) = delete;

  Worker &worker() { return *worker_; }  // for this thread's functions only
  // Runs `f` on the progress thread (soon; never inline). After stop(), returns false.
  bool post(std::function<void()> f);
  // Runs `f` on the progress thread and waits for it.
  void run(const std::function<void()> &f);
  // Operations outstanding on this thread: while any is, the poll timeout is kFallbackMs.
  // Called on the progress thread only.
  void started() { ++outstanding_; }
  void ended() { --outstanding_; }
  // `f` runs on the thread as it stops, before the worker is destroyed (to close endpoints).
  void on_stop(std::function<void()> f);

 private:
  void loop();
  void wake();
  std::unique_ptr<Worker> worker_;
  int wake_fd_ = -1;
  std::mutex mu_;
  std::deque<std::function<void()>> posted_;
  std::function<void()> on_stop_;
  bool stopping_ = false;
  int outstanding_ = 0;  // progress thread only
  std::thread thread_;
};

}  // namespace gf::transport
