// What a run finished by someone other than this process's scheduler shares (a graph run in the
// service, a graph split between here and there): a Completion the run publishes once it has
// ended, the caller's completion callback on it, and waiting for it.
#pragma once

#include <functional>

#include "core/completion.hpp"
#include "runtime/run.hpp"
#include "runtime/worker.hpp"

namespace gf {

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
  // The handle goes once a completion callback still due has returned (or at once without one),
  // so the callback can use its run as documented.
  void forget_after_callback(std::function<void()> forget) {
    if (completion_.has_callback()) {
      completion_.when_published(std::move(forget));
    } else {
      forget();
    }
  }
  Completion completion_;

 private:
  const Scheduler &scheduler_;
};

}  // namespace gf
