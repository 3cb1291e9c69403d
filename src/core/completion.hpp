// A one-shot completion: what a caller waits on. Published once, by whoever finishes the work:
// it runs its callback first, then wakes waiters, makes its descriptor readable, and runs what
// was asked to happen after publication.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace gf {

class Completion {
 public:
  Completion() = default;
  ~Completion();
  Completion(const Completion &) = delete;
  Completion &operator=(const Completion &) = delete;

  // Set before the work can finish; runs on the publishing thread.
  void set_callback(std::function<void()> callback) { callback_ = std::move(callback); }
  bool has_callback() const { return static_cast<bool>(callback_); }
  void publish();
  bool published() const { return published_.load(std::memory_order_acquire); }
  // Blocks until published or timeout (negative: none); true when published. From inside the
  // callback it returns true at once: the callback is part of the publication.
  bool wait(int64_t timeout_ms);
  // An eventfd that becomes readable once published; created on first use, owned here.
  int fd();
  // Runs `then` once published (after the callback): now if already, else on the publisher.
  void when_published(std::function<void()> then);
  // True while this thread runs this completion's callback.
  bool in_callback() const;

 private:
  std::function<void()> callback_;
  std::atomic<bool> published_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> after_;  // guarded by mu_
  int event_fd_ = -1;            // guarded by mu_
};

}  // namespace gf
