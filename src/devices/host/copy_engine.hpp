// One emulated copy engine: a thread that performs queued copies in order and takes as long as
// the configured bandwidth says, so transfers overlap with compute the way DMA engines do.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "devices/backend.hpp"

namespace gf {

class CopyEngine {
 public:
  explicit CopyEngine(double bytes_per_second);
  ~CopyEngine();
  CopyEngine(const CopyEngine &) = delete;
  CopyEngine &operator=(const CopyEngine &) = delete;

  void submit(const CopyRequest &request, CopyDone done);
  // Performs the queued copies, then stops the thread. Idempotent.
  void drain_and_stop();

 private:
  void loop();

  double bytes_per_second_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<CopyRequest, CopyDone>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gf
