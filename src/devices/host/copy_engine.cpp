#include "devices/host/copy_engine.hpp"

#include <chrono>
#include <cstring>

#include "core/clock.hpp"

namespace gf {

CopyEngine::CopyEngine(double bytes_per_second)
    : bytes_per_second_(bytes_per_second), thread_([this] { loop(); }) {}

CopyEngine::~CopyEngine() {
  drain_and_stop();
}

void CopyEngine::submit(const CopyRequest &request, CopyDone done) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(request, std::move(done));
  }
  cv_.notify_one();
}

void CopyEngine::drain_and_stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CopyEngine::loop() {
  for (;;) {
    std::pair<CopyRequest, CopyDone> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every queued copy is done
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // The job, and whatever its callback holds, is released here without the engine's mutex:
    // dropping the callback may destroy a run, which takes the scheduler's mutex.
    auto &[request, done] = job;
    auto start = Clock::now();
    if (request.bytes > 0) std::memcpy(request.destination, request.source, request.bytes);
    if (bytes_per_second_ > 0) {
      auto duration =
          std::chrono::duration<double>(static_cast<double>(request.bytes) / bytes_per_second_);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(duration));
    }
    done(std::string());
  }
}

}  // namespace gf
