#include "run_progress.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

namespace gpuflow_cli {

namespace {

std::string duration_text(double seconds) {
  char buf[32];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds / 60),
                  static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds / 3600),
                  static_cast<int>(seconds / 60) % 60);
  }
  return buf;
}

}  // namespace

void Progress::show(const gf_run_stats &s, bool final) {
  uint64_t done = std::min(s.succeeded + s.failed + s.cancelled, s.tasks);
  double rate = s.elapsed_s > 0 ? static_cast<double>(done) / s.elapsed_s : 0;
  std::string eta = done == s.tasks ? duration_text(0)
                    : rate > 0      ? duration_text(static_cast<double>(s.tasks - done) / rate)
                                    : "?";
  int percent = s.tasks ? static_cast<int>(100 * done / s.tasks) : 100;
  if (terminal_) {
    constexpr int kWidth = 30;
    int filled = s.tasks ? static_cast<int>(kWidth * done / s.tasks) : kWidth;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::printf("\r[%s] %3d%% %" PRIu64 "/%" PRIu64 " tasks", bar.c_str(), percent, done, s.tasks);
    if (s.failed) std::printf(", %" PRIu64 " failed", s.failed);
    std::printf("  %.1f tasks/s  ETA %s  elapsed %s\x1b[K%s", rate, eta.c_str(),
                duration_text(s.elapsed_s).c_str(), final ? "\n" : "");
  } else {
    if (!final && s.elapsed_s < next_s_) return;
    while (next_s_ <= s.elapsed_s) next_s_ += interval_;
    std::printf("progress: %" PRIu64 "/%" PRIu64 " tasks (%d%%), %" PRIu64
                " failed, %.1f tasks/s, ETA %s, elapsed %s\n",
                done, s.tasks, percent, s.failed, rate, eta.c_str(),
                duration_text(s.elapsed_s).c_str());
  }
  std::fflush(stdout);
}

}  // namespace gpuflow_cli
