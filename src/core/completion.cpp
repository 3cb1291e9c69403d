#include "core/completion.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "core/error.hpp"

namespace gf {
namespace {

thread_local const Completion *in_callback_of = nullptr;

void signal_fd(int fd) {
  uint64_t one = 1;
  ssize_t written;
  do {
    written = ::write(fd, &one, sizeof one);
  } while (written < 0 && errno == EINTR);
}

}  // namespace

Completion::~Completion() {
  if (event_fd_ >= 0) ::close(event_fd_);
}

bool Completion::in_callback() const {
  return in_callback_of == this;
}

void Completion::publish() {
  if (callback_) {
    in_callback_of = this;
    callback_();
    in_callback_of = nullptr;
  }
  std::function<void()> then;
  {
    std::lock_guard lock(mu_);
    published_.store(true, std::memory_order_release);
    if (event_fd_ >= 0) signal_fd(event_fd_);
    cv_.notify_all();
    then = std::move(after_);
  }
  if (then) then();
}

void Completion::when_published(std::function<void()> then) {
  {
    std::lock_guard lock(mu_);
    if (!published()) {
      after_ = std::move(then);
      return;
    }
  }
  then();
}

bool Completion::wait(int64_t timeout_ms) {
  if (published() || in_callback()) return true;
  std::unique_lock lock(mu_);
  auto done = [this] { return published(); };
  if (timeout_ms < 0) {
    cv_.wait(lock, done);
    return true;
  }
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
}

int Completion::fd() {
  std::lock_guard lock(mu_);
  if (event_fd_ < 0) {
    event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) fail(GF_ERR_SYSTEM, std::string("eventfd: ") + std::strerror(errno));
    if (published()) signal_fd(event_fd_);
  }
  return event_fd_;
}

}  // namespace gf
