// A graph that runs inside the node's service (docs/transport.md, "Graphs in the service"): its
// document goes up as a blob, the service runs it on a pool of its own that leases in this
// process's name, and RunFinished says how it ended. Kept outputs and the per-task report stay
// on the service as this client's blobs until the run is destroyed; gf_run_fetch gets an output
// over the data plane, and the first per-task query gets the report.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/connection.hpp"
#include "runtime/published_run.hpp"

namespace gf {

class PoolCore;

class ServiceRun final : public PublishedRun, public std::enable_shared_from_this<ServiceRun> {
 public:
  ServiceRun(std::shared_ptr<PoolCore> pool, std::shared_ptr<Graph> graph);
  ~ServiceRun() override;

  // Freezes the graph, puts its document and submits it; returns once the service accepted it.
  // Throws the refusal (a graph the service cannot run, a document over the blob cap, …).
  void start() override;

  const Graph &graph() const override { return *graph_; }
  gf_run_where where() const override { return GF_RUN_IN_SERVICE; }
  gf_run_state state() override;
  void cancel() override;
  void release(std::function<void()> forget) override;
  TaskRecord task(TaskIndex t) override;
  RunStats snapshot() override;
  std::string failure_summary() override;
  uint64_t read_buffer(DataIndex d, void *dst, uint64_t capacity) override;
  void *read_value(DataIndex d) override;

 private:
  struct Output {
    uint64_t blob = 0, size = 0;
  };
  // On the connection's reader thread: the service's RunFinished, or null when it went away.
  void finished(const std::vector<uint8_t> *payload, const std::string &why);
  // The per-task report (and the outputs it lists), fetched once (mu_ held by the caller).
  void load_report(std::unique_lock<std::mutex> &lock);
  // Drops the run's blobs on the service, once it has ended and the caller let go.
  void forget_blobs();

  std::shared_ptr<PoolCore> pool_;          // kept alive, as a local run keeps its pool
  std::shared_ptr<ServiceRun> keep_alive_;  // from start() until the run ended
  std::shared_ptr<client::Connection> connection_;
  std::shared_ptr<Graph> graph_;
  uint64_t run_id_ = 0;
  const uint64_t tasks_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  std::mutex mu_;
  gf_run_state state_ = GF_RUN_RUNNING;
  std::string summary_;
  RunStats snapshot_{};
  RunStats progress_{};  // while it runs: the service's last RunProgress
  std::map<DataIndex, Output> outputs_;
  Output report_;
  bool released_ = false;
  bool report_loaded_ = false;
  bool report_fetching_ = false;  // a thread is getting it, without mu_
  std::condition_variable report_fetched_;
  std::string report_error_;  // why the report could not be had
  std::vector<uint8_t> task_states_;
  std::vector<uint32_t> task_attempts_, task_workers_;
  std::unordered_map<TaskIndex, std::string> task_errors_;
};

}  // namespace gf
