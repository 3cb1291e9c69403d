// What `gpuflow run` learns from the pool's event stream: every task attempt with its worker and
// times, for the summary table and the Chrome/Perfetto trace.
#pragma once

#include <gpuflow.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

class TaskTrace {
 public:
  static void on_event(const gf_event *event, void *self);

  // Busy time and tasks per worker, one line per worker that ran something.
  void print_summary(gf_pool *pool, double elapsed_s) const;
  // Chrome trace event format: one "complete" event per attempt, one track per worker.
  bool write_chrome_trace(const std::string &path, gf_pool *pool, std::string &error) const;

 private:
  struct Span {
    uint64_t task;
    uint32_t worker, attempt;
    double start_s, end_s;
    bool ok;
    std::string name;
  };
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, uint32_t>, double> started_;  // (task, attempt) -> start
  std::vector<Span> spans_;
};
