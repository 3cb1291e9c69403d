// A dashboard: an HTTP server (http_server.hpp) with the live page at /, its updates as
// server-sent events at /events (one aggregated snapshot every kPublishMs, never one message per
// task), the same snapshot at /snapshot.json, and Prometheus metrics at /metrics, all from one
// Source (source.hpp): a pool (pool_source.hpp) or the node's service (service_source.hpp).
//
// It reads what it shows through the same doors as everyone else: the pool's event stream and
// the scheduler's observer and snapshot queries, or the service's published StatusReply.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dashboard/http_server.hpp"
#include "dashboard/source.hpp"

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

  // Serves `source` at `address` (HOST:PORT); throws gf::Error (GF_ERR_SYSTEM naming the
  // address) when it cannot bind.
  Dashboard(std::unique_ptr<Source> source, const std::string &address);
  static std::unique_ptr<Dashboard> for_pool(std::shared_ptr<PoolCore> pool,
                                             const std::string &address);
  static std::unique_ptr<Dashboard> for_service(service::Server &server,
                                                const std::string &address);
  ~Dashboard();  // stop()
  Dashboard(const Dashboard &) = delete;
  Dashboard &operator=(const Dashboard &) = delete;

  void stop();  // idempotent; the source stops watching first
  const std::string &url() const { return http_->url(); }
  uint16_t port() const { return http_->port(); }

  // What /metrics and /snapshot.json serve (any thread).
  std::string metrics() const;
  std::string snapshot_json(double bars_since) const { return source_->snapshot_json(bars_since); }

 private:
  void publisher();

  std::unique_ptr<Source> source_;
  std::shared_ptr<Broadcast> events_ = std::make_shared<Broadcast>();
  std::unique_ptr<HttpServer> http_;
  std::thread publisher_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
};

}  // namespace gf::dashboard
