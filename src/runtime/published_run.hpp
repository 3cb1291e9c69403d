// What a run finished by someone other than this process's scheduler shares (a graph run in the
// service, a graph split between here and there): a Completion the run publishes once it has
// ended, the caller's completion callback on it, and waiting for it.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/completion.hpp"
#include "runtime/run.hpp"
#include "runtime/step_aside.hpp"

namespace gf {

class Scheduler;

class PublishedRun : public Run {
 public:
  // `scheduler`: the pool's, so that a body of that pool waiting here steps aside.
  explicit PublishedRun(const Scheduler &scheduler) : scheduler_(scheduler) {}

  void attach(gf_run *handle, const gf_submit_options &options) override {
    if (!options.on_complete) return;
    completion_.set_callback(
        [this, handle, callback = options.on_complete, user_data = options.user_data] {
          callback(handle, state(), user_data);
        });
  }
  bool wait(int64_t timeout_ms) override {
    if (completion_.published() || completion_.in_callback()) return true;
    if (timeout_ms == 0) return false;
    // A body waiting for a run that needs this pool's workers (a split run's parts here) lends
    // its thread, as for a local run (runtime/worker.hpp).
    StepAside aside(scheduler_);
    return completion_.wait(timeout_ms);
  }
  int fd() override { return completion_.fd(); }

 protected:
  // The thread that finishes the run (and publishes it) holds a reference to it until it is done;
  // it then lets go and opens this. A caller letting go of a finished run waits for that, so the
  // caller's own thread, not a detached one, tears the run (and maybe its pool) down: nothing is
  // left running in the background when the caller goes on to exit.
  struct Finisher {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    void finish() {
      {
        std::lock_guard lock(mu);
        done = true;
      }
      cv.notify_all();
    }
    void wait() {
      std::unique_lock lock(mu);
      cv.wait(lock, [this] { return done; });
    }
  };
  // Runs `finish` on a thread of its own that holds `self` until it returned.
  template <class Self, class Finish>
  void finish_on_thread(std::shared_ptr<Self> self, Finish finish) {
    std::thread([self = std::move(self), finish, finisher = finisher_]() mutable {
      finish(*self);
      self.reset();  // the last reference only when the caller let go before the run ended
      finisher->finish();
    }).detach();
  }
  // The handle goes once a completion callback still due has returned (or at once without one),
  // so the callback can use its run as documented. `ended`: the run had finished when the caller
  // let go, so the finishing thread is about to let go too (it is not waited for from its own
  // callback).
  void forget_after_callback(std::function<void()> forget, bool ended) {
    if (ended && !completion_.in_callback()) finisher_->wait();
    if (completion_.has_callback()) {
      completion_.when_published(std::move(forget));
    } else {
      forget();
    }
  }
  Completion completion_;
  std::shared_ptr<Finisher> finisher_ = std::make_shared<Finisher>();

 private:
  const Scheduler &scheduler_;
};

}  // namespace gf
