// Waits for a run while another thread cancels it after `delay`: the race the continuation and
// hot-path stress tests put a run through. Returns what gf_run_wait returned.
#pragma once

#include <gpuflow.h>

#include <chrono>
#include <thread>

namespace gft {

inline gf_status wait_cancelled_after(gf_run *run, std::chrono::microseconds delay,
                                      int wait_ms = 60000) {
  std::thread canceller([run, delay] {
    std::this_thread::sleep_for(delay);
    gf_run_cancel(run);
  });
  const gf_status s = gf_run_wait(run, wait_ms);
  canceller.join();
  return s;
}

}  // namespace gft
