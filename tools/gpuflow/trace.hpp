// One timeline of a pool: task attempts, transfers and spills from the pool's event stream, and,
// on a connected pool, the leases the node's service granted on the same devices (other
// processes' jobs included). Written as Chrome trace JSON (Perfetto, chrome://tracing): one
// process per device with lanes for its tasks, its copies and the leases on it; the CPU workers
// in one process. `gpuflow run --trace` and `gpuflow trace --pool` write it.
#pragma once

#include <gpuflow.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

class TaskTrace {
 public:
  TaskTrace();
  ~TaskTrace();
  TaskTrace(const TaskTrace &) = delete;
  TaskTrace &operator=(const TaskTrace &) = delete;

  static void on_event(const gf_event *event, void *self);

  // On a connected pool: reads the service's leases now and every second until stop_leases (or
  // destruction), so that leases which end meanwhile are all seen. No-op on an embedded pool.
  void follow_leases(gf_pool *pool);
  void stop_leases();
  // Reads the service's leases once; false (with `error`) when the status cannot be had.
  bool read_leases(gf_pool *pool, std::string &error);

  // Busy time and tasks per worker, one line per worker that ran something.
  void print_summary(gf_pool *pool, double elapsed_s) const;
  bool write_chrome_trace(const std::string &path, gf_pool *pool, std::string &error) const;

 private:
  enum class Kind { kTask, kTransfer, kSpill, kLease };
  struct Span {
    Kind kind;
    uint32_t worker;        // where it is drawn
    double start_s, end_s;  // seconds since the trace began
    bool ok;
    std::string name;
    std::string args;  // JSON object members, without braces
  };
  double now_s() const;
  void add_lease(uint64_t id, const std::string &holder, const std::string &name, double since_s,
                 double until_s, bool ended, const std::vector<std::pair<int32_t, double>> &on);

  double unix_start_s_;       // the trace's zero, as unix time
  double pool_offset_s_ = 0;  // pool time + offset = trace time
  bool have_offset_ = false;
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, uint32_t>, double> started_;  // (task, attempt) -> start
  std::vector<Span> spans_;
  // Leases by id: the latest view of each (an open one grows until it ends).
  std::map<uint64_t, std::vector<Span>> leases_;
  std::map<int32_t, uint32_t> worker_of_ordinal_;

  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool poll_stop_ = false;
  std::thread poller_;
};
