// The pool's dashboard: an HTTP server (http_server.hpp) with the live page at /, its updates
// as server-sent events at /events (one aggregated snapshot every kPublishMs, never one message
// per task), the same snapshot at /snapshot.json, and Prometheus metrics at /metrics.
//
// It reads what it shows through the same doors as everyone else: the pool's event stream (a
// Collector tapped into its EventHub), the scheduler's snapshot queries (pool_snapshot,
// ledger_lines, device_memory), and the service's published BookSnapshot.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "dashboard/collector.hpp"
#include "dashboard/http_server.hpp"

namespace gf {
class PoolCore;
namespace service {
class Server;
}
}  // namespace gf

namespace gf::dashboard {

// What gf_pool_config.dashboard / GPUFLOW_DASHBOARD ask for: empty when no dashboard. Throws
// gf::Error (GF_ERR_INVALID_ARGUMENT) for an address that is not HOST:PORT. `from_env` tells
// whether the address came from the variable.
std::string requested_address(const char *field, const char *env_name, bool *from_env = nullptr);

class Dashboard {
 public:
  static constexpr int kPublishMs = 250;

  static std::unique_ptr<Dashboard> for_pool(std::shared_ptr<PoolCore> pool,
                                             const std::string &address);
  static std::unique_ptr<Dashboard> for_service(service::Server &server,
                                                const std::string &address);
  ~Dashboard();  // stop()
  Dashboard(const Dashboard &) = delete;
  Dashboard &operator=(const Dashboard &) = delete;

  void stop();  // idempotent; the event tap is removed first
  const std::string &url() const { return http_->url(); }
  uint16_t port() const { return http_->port(); }

  // What /metrics and /snapshot.json serve (any thread).
  std::string metrics() const;
  std::string snapshot_json(double bars_since) const;

 private:
  Dashboard() = default;
  void start(const std::string &address);
  void publisher();
  std::string pool_metrics() const;
  std::string service_metrics() const;
  std::string pool_json(double bars_since) const;
  std::string service_json() const;

  std::shared_ptr<PoolCore> pool_;
  service::Server *server_ = nullptr;
  std::shared_ptr<Collector> collector_;
  std::shared_ptr<Broadcast> events_ = std::make_shared<Broadcast>();
  std::unique_ptr<HttpServer> http_;
  std::thread publisher_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
};

}  // namespace gf::dashboard
