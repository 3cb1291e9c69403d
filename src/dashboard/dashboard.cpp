#include "dashboard/dashboard.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "dashboard/assets.hpp"
#include "dashboard/metrics_text.hpp"
#include "dashboard/pool_source.hpp"
#include "dashboard/service_source.hpp"

namespace gf::dashboard {

std::string requested_address(const char *field, const char *env_name, bool *from_env) {
  std::string text = field ? field : "";
  std::string what = "gf_pool_config.dashboard";
  if (from_env) *from_env = false;
  if (text.empty()) {
    const char *env = env_name ? std::getenv(env_name) : nullptr;
    if (env && *env) {
      text = env;
      what = env_name;
      if (from_env) *from_env = true;
    }
  }
  if (text.empty() || text == "off") return "";
  parse_address(text, what);  // refuses a malformed one now, naming where it came from
  return text;
}

std::unique_ptr<Dashboard> Dashboard::for_pool(std::shared_ptr<PoolCore> pool,
                                               const std::string &address) {
  return std::make_unique<Dashboard>(std::make_unique<PoolSource>(std::move(pool)), address);
}

std::unique_ptr<Dashboard> Dashboard::for_service(service::Server &server,
                                                  const std::string &address) {
  return std::make_unique<Dashboard>(std::make_unique<ServiceSource>(server), address);
}

Dashboard::Dashboard(std::unique_ptr<Source> source, const std::string &address)
    : source_(std::move(source)) {
  const Address a = parse_address(address, "the dashboard address");
  http_ = std::make_unique<HttpServer>(
      a,
      [this](const std::string &, const std::string &path) -> HttpResponse {
        if (path == "/" || path == "/index.html")
          return HttpResponse{200, "text/html; charset=utf-8", std::string(index_html())};
        if (path == "/metrics")
          return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics()};
        if (path == "/snapshot.json")
          return HttpResponse{200, "application/json", snapshot_json(0)};
        return HttpResponse{404, "text/plain; charset=utf-8", "not found\n"};
      },
      "/events", events_);
  publisher_ = std::thread([this] { publisher(); });
}

Dashboard::~Dashboard() {
  stop();
}

void Dashboard::stop() {
  source_->stop();
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_.exchange(true)) return;
  }
  stop_cv_.notify_all();
  if (publisher_.joinable()) publisher_.join();
  if (http_) http_->stop();
}

void Dashboard::publisher() {
  double last = 0;
  std::unique_lock lock(stop_mu_);
  while (!stopping_.load()) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(kPublishMs));
    if (stopping_.load()) break;
    if (http_->live_streams() == 0) continue;  // nobody watches: nothing to build
    lock.unlock();
    const double now = source_->now_s();
    std::string message = snapshot_json(last);
    last = now;
    events_->publish(std::move(message));
    lock.lock();
  }
}

std::string Dashboard::metrics() const {
  Metrics self;
  self.family("gpuflow_dashboard_connections", "gauge",
              "HTTP connections this dashboard has open (live streams included).");
  self.sample("gpuflow_dashboard_connections", "", num(uint64_t{http_->connections()}));
  self.family("gpuflow_dashboard_streams", "gauge", "Live views (/events) open.");
  self.sample("gpuflow_dashboard_streams", "", num(uint64_t{http_->live_streams()}));
  return source_->metrics() + self.take();
}

}  // namespace gf::dashboard
