#include "transport/progress_thread.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>

#include "core/error.hpp"

namespace gf::transport {

ProgressThread::ProgressThread(std::unique_ptr<Worker> worker) : worker_(std::move(worker)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) fail(GF_ERR_SYSTEM, std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { loop(); });
}

ProgressThread::~ProgressThread() {
  stop();
  worker_.reset();
  ::close(wake_fd_);
}

void ProgressThread::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
}

void ProgressThread::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

bool ProgressThread::post(std::function<void()> f) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    posted_.push_back(std::move(f));
  }
  wake();
  return true;
}

void ProgressThread::run(const std::function<void()> &f) {
  std::promise<void> done;
  auto future = done.get_future();
  if (!post([&] {
        try {
          f();
          done.set_value();
        } catch (...) {
          done.set_exception(std::current_exception());
        }
      })) {
    fail(GF_ERR_SYSTEM, "the UCX progress thread has stopped");
  }
  future.get();
}

void ProgressThread::on_stop(std::function<void()> f) {
  std::lock_guard lock(mu_);
  on_stop_ = std::move(f);
}

void ProgressThread::loop() {
  for (;;) {
    std::deque<std::function<void()>> batch;
    bool stopping = false;
    {
      std::lock_guard lock(mu_);
      batch.swap(posted_);
      stopping = stopping_;
    }
    for (auto &f : batch) f();
    if (stopping) break;
    worker_->drain();
    if (!worker_->progress_and_arm()) continue;  // events came while arming
    pollfd fds[2] = {{worker_->event_fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ::poll(fds, 2, outstanding_ > 0 ? kFallbackMs : kIdleMs);
    if (fds[1].revents & POLLIN) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
  }
  std::function<void()> stop;
  {
    std::lock_guard lock(mu_);
    stop = std::move(on_stop_);
  }
  if (stop) stop();
  worker_->settle();
}

}  // namespace gf::transport
