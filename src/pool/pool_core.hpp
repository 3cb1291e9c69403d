// A pool: its device backend, its workers and the scheduler between them. Shared by the pool
// handle and every run submitted to it, so a run outlives gf_pool_destroy safely; shutdown()
// stops the threads, and the memory goes when the last run is gone. A pool is never torn down on
// one of its own worker threads (a thread cannot join itself): when the last reference goes
// there, the teardown moves to a thread of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "client/connection.hpp"
#include "client/service_link.hpp"
#include "core/clock.hpp"
#include "core/events.hpp"
#include "devices/backend.hpp"
#include "kernels/kernel_registry.hpp"
#include "pool/lease_agent.hpp"
#include "pool/pool_options.hpp"
#include "runtime/local_run.hpp"
#include "runtime/worker.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

class PoolCore : public std::enable_shared_from_this<PoolCore> {
 public:
  static std::shared_ptr<PoolCore> create(const gf_pool_config &config);
  // A pool on the devices of the service at the other end of `connection`, leasing them
  // through it; `options` gives everything else (CPU workers, labels, spilling).
  // A pool connected through `link` reconnects when its service comes back (ServiceLink);
  // through a bare connection it does not (the service's own pools).
  static std::shared_ptr<PoolCore> create_connected(PoolOptions options,
                                                    std::shared_ptr<client::ServiceLink> link);
  static std::shared_ptr<PoolCore> create_connected(PoolOptions options,
                                                    std::shared_ptr<client::Connection> connection);
  PoolCore(const PoolOptions &options, std::shared_ptr<client::ServiceLink> link);
  ~PoolCore();
  PoolCore(const PoolCore &) = delete;
  PoolCore &operator=(const PoolCore &) = delete;

  // Checks the graph against the pool and builds its run; nothing runs until it is started.
  std::shared_ptr<LocalRun> prepare(std::shared_ptr<Graph> graph);
  // The run of a submitted graph, where `asked` says it runs (pool/where.hpp: here, prepared as
  // above; in the service; or split), not started yet: the caller names its handle first
  // (Run::attach), since a run's completion may be published as soon as it starts.
  std::shared_ptr<Run> make_run(std::shared_ptr<Graph> graph, gf_run_where asked);
  // Starts a run make_run made; one that goes elsewhere is tracked, so that shutdown() cancels it.
  void start(const std::shared_ptr<Run> &run);
  // Cancels every run, waits for running bodies, joins threads. Idempotent. Called by one of the
  // pool's own task bodies, it stops the pool and hands the joining to a thread of its own.
  void shutdown();
  bool is_shut_down() const { return shut_down_.load(); }
  // A run this pool's scheduler does not run (in the service, or split): shutdown() cancels it
  // too. Kept weakly.
  void track(std::weak_ptr<Run> run);

  Scheduler &scheduler() { return *scheduler_; }
  size_t worker_count() const { return worker_states_.size(); }
  const WorkerState &worker(size_t i) const { return *worker_states_[i]; }
  KernelRegistry &kernels() { return kernels_; }
  EventHub &events() { return events_; }
  // The public subscriber of the event stream (gf_pool_set_event_callback; null: none). While
  // one is set, the scheduler measures the queue waits its events carry (gf_event.queue_wait_s).
  void subscribe_events(gf_event_fn fn, void *user_data);
  const std::vector<DeviceDescription> &devices() const { return devices_; }
  // Where the list of devices came from, in words ("CUDA_VISIBLE_DEVICES=1,3").
  const std::string &devices_source() const { return devices_source_; }
  // The connection to the node's service now (during an outage, the one that ended, whose calls
  // fail naming the endpoint); nullptr for an embedded pool.
  std::shared_ptr<client::Connection> connection() const {
    return link_ ? link_->current() : nullptr;
  }
  // What keeps the pool connected; nullptr for an embedded pool.
  const std::shared_ptr<client::ServiceLink> &link() const { return link_; }
  // This pool's number among the pools of the process (1, 2, ...), for names that must differ
  // between pools (command logs).
  uint64_t serial() const { return serial_; }
  // The wall-clock time of a steady-clock instant, through one offset taken when the pool was
  // created: the same instant always maps to the same time.
  std::chrono::system_clock::time_point wall_time(Clock::time_point t) const {
    return created_wall_ +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(t - created_steady_);
  }

 private:
  // First, so that they outlive the workers and every body resolved from them.
  KernelRegistry kernels_;
  EventHub events_;
  std::shared_ptr<client::ServiceLink> link_;
  std::unique_ptr<DeviceBackend> backend_;
  std::string devices_source_;
  std::vector<DeviceDescription> devices_;
  std::vector<std::string> device_uuids_;     // by device, "" when emulated: for command bodies
  std::vector<WorkerState *> worker_states_;  // owned by the scheduler
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<LeaseAgent> lease_agent_;  // connected pools: holds the devices' leases
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex subscriber_mu_;
  ObserverHandle subscriber_observer_;  // under subscriber_mu_: while a subscriber is set
  void join_threads();
  std::atomic<bool> shut_down_{false};
  std::mutex tracked_mu_;
  std::vector<std::weak_ptr<Run>> tracked_;  // under tracked_mu_
  uint64_t serial_;
  std::atomic<uint64_t> runs_prepared_{0};
  Clock::time_point created_steady_ = Clock::now();
  std::chrono::system_clock::time_point created_wall_ = std::chrono::system_clock::now();
};

}  // namespace gf
