#include "runtime/run.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.hpp"
#include "runtime/worker.hpp"

namespace gf {
namespace {

// The run whose completion callback is running on this thread: gf_run_wait from inside it must
// not wait for its own publication.
thread_local const Run *completing_run = nullptr;

void signal_fd(int fd) {
  uint64_t one = 1;
  ssize_t written;
  do {
    written = ::write(fd, &one, sizeof one);
  } while (written < 0 && errno == EINTR);
}

}  // namespace

Run::Run(std::shared_ptr<PoolCore> pool, Scheduler &scheduler, std::shared_ptr<Graph> graph,
         const gf_submit_options &options)
    : pool_(std::move(pool)),
      scheduler_(scheduler),
      graph_(std::move(graph)),
      on_complete_(options.on_complete),
      on_complete_data_(options.user_data) {}

Run::~Run() {
  if (event_fd_ >= 0) ::close(event_fd_);
}

void Run::publish_completion() {
  if (on_complete_) {
    completing_run = this;
    on_complete_(handle_, state(), on_complete_data_);
    completing_run = nullptr;
  }
  std::function<void()> then;
  {
    std::lock_guard lock(done_mu_);
    published_.store(true, std::memory_order_release);
    if (event_fd_ >= 0) signal_fd(event_fd_);
    done_cv_.notify_all();
    then = std::move(after_publish_);
  }
  if (then) then();
}

void Run::when_published(std::function<void()> then) {
  {
    std::lock_guard lock(done_mu_);
    if (!published()) {
      after_publish_ = std::move(then);
      return;
    }
  }
  then();
}

bool Run::wait_published(int64_t timeout_ms) {
  if (published() || completing_run == this) return true;
  if (timeout_ms == 0) return false;
  if (Worker::running_run() == this) {
    fail(GF_ERR_STATE,
         "a task body cannot wait for its own run: the run finishes only after the body returns");
  }
  StepAside aside(scheduler_);
  std::unique_lock lock(done_mu_);
  auto done = [this] { return published(); };
  if (timeout_ms < 0) {
    done_cv_.wait(lock, done);
    return true;
  }
  return done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
}

int Run::completion_fd() {
  std::lock_guard lock(done_mu_);
  if (event_fd_ < 0) {
    event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) fail(GF_ERR_SYSTEM, std::string("eventfd: ") + std::strerror(errno));
    if (published()) signal_fd(event_fd_);
  }
  return event_fd_;
}

}  // namespace gf
