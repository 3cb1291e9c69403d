// gpuflow/service.hpp — part of gpuflow.hpp (include that): the node's service run in this
// process, and its configuration.
#ifndef GPUFLOW_SERVICE_HPP
#define GPUFLOW_SERVICE_HPP

#include "describe.hpp"

namespace gpuflow {

// ---------------------------------------------------------------------------------------------
// Service: the node's shared pool, run on a thread of this process (gf_service_start), for
// tests, tools and single-node deployments. Thread-safe; stopping (destruction, assignment) is
// externally synchronized and never from its log function.

class ServiceConfig {
 public:
  ServiceConfig() { c_ = GF_SERVICE_CONFIG_INIT; }
  // Called with each line the service logs, on its thread; must not call into the service.
  // Exceptions it throws are dropped: they may not cross into C.
  using LogFn = std::function<void(std::string_view)>;
  ServiceConfig &pool(PoolConfig v) { return pool_ = std::move(v), *this; }
  ServiceConfig &socket_path(std::string v) { return socket_path_ = std::move(v), *this; }
  ServiceConfig &group(std::string v) { return group_ = std::move(v), *this; }
  ServiceConfig &usage_half_life_s(double v) { return c_.usage_half_life_s = v, *this; }
  ServiceConfig &client_gpu_cap(double v) { return c_.client_gpu_cap = v, *this; }
  ServiceConfig &user_gpu_cap(double v) { return c_.user_gpu_cap = v, *this; }
  ServiceConfig &user_weights(std::string v) { return user_weights_ = std::move(v), *this; }
  ServiceConfig &dashboard(std::string v) { return dashboard_ = std::move(v), *this; }
  ServiceConfig &plugin(std::string path) { return plugins_.push_back(std::move(path)), *this; }
  ServiceConfig &listen(std::string v) { return listen_ = std::move(v), *this; }
  ServiceConfig &token_file(std::string v) { return token_file_ = std::move(v), *this; }
  ServiceConfig &job_kill_grace_s(double v) { return c_.job_kill_grace_s = v, *this; }
  ServiceConfig &listen_fd(int32_t fd) { return c_.listen_fd = fd, *this; }
  ServiceConfig &log(LogFn fn) { return log_ = std::move(fn), *this; }

  // The C struct, log fields aside (Service sets them to a function it keeps alive).
  const gf_service_config &desc() {
    c_.pool = pool_ ? &pool_->desc() : nullptr;
    c_.socket_path = detail::c_str_or_null(socket_path_);
    c_.group = detail::c_str_or_null(group_);
    c_.user_weights = detail::c_str_or_null(user_weights_);
    c_.dashboard = detail::c_str_or_null(dashboard_);
    c_plugins_.clear();
    for (const std::string &p : plugins_) c_plugins_.push_back(p.c_str());
    c_.plugins = c_plugins_.empty() ? nullptr : c_plugins_.data();
    c_.plugin_count = static_cast<uint32_t>(c_plugins_.size());
    c_.listen = detail::c_str_or_null(listen_);
    c_.token_file = detail::c_str_or_null(token_file_);
    return c_;
  }

 private:
  friend class Service;
  gf_service_config c_;
  std::optional<PoolConfig> pool_;
  std::string socket_path_, group_, user_weights_, dashboard_, listen_, token_file_;
  std::vector<std::string> plugins_;
  std::vector<const char *> c_plugins_;
  LogFn log_;
};

class Service {
 public:
  Service() noexcept = default;  // empty
  Service(Service &&) noexcept = default;
  // Stops this service first, then takes the other's (its log function stays with it).
  Service &operator=(Service &&other) noexcept {
    if (this != &other) {
      stop();
      raw_ = std::move(other.raw_);
      log_ = std::move(other.log_);
    }
    return *this;
  }
  ~Service() = default;
  explicit Service(ServiceConfig config) {
    gf_service_config c = config.desc();
    if (config.log_) {
      log_ = std::make_unique<ServiceConfig::LogFn>(std::move(config.log_));
      c.log = &log_line;
      c.log_user_data = log_.get();
    }
    gf_service *raw = nullptr;
    detail::check(gf_service_start(&raw, &c));
    raw_.reset(raw);
  }
  gf_service *get() const noexcept { return raw_.get(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  // Where local clients connect: "unix:///…" (Pool::connect takes it).
  std::string endpoint() const { return detail::copy_or_empty(gf_service_endpoint(get())); }
  // Where clients of other hosts connect, "tcp://HOST:PORT", when it listens for them.
  std::optional<std::string> remote_endpoint() const {
    const char *s = gf_service_remote_endpoint(get());
    return s ? std::optional<std::string>(s) : std::nullopt;
  }
  std::optional<std::string> dashboard_url() const {
    const char *s = gf_service_dashboard_url(get());
    return s ? std::optional<std::string>(s) : std::nullopt;
  }
  // Replaces the fair-share policy (user_weights, caps, half life); other fields are ignored.
  void update_policy(ServiceConfig policy) {
    detail::check(gf_service_update_policy(get(), &policy.desc()));
  }
  // Stops it now: clients are disconnected, leases end. Also what destruction does.
  void stop() noexcept {
    raw_.reset();
    log_.reset();
  }

 private:
  static void log_line(const char *line, void *user_data) noexcept {
    try {
      (*static_cast<ServiceConfig::LogFn *>(user_data))(line ? line : "");
    } catch (...) {  // nothing may unwind into the service's thread
    }
  }
  // Declared first so that the function outlives the service, which calls it until stopped.
  std::unique_ptr<ServiceConfig::LogFn> log_;
  std::unique_ptr<gf_service, detail::ServiceStop> raw_;
};

}  // namespace gpuflow

#endif  // GPUFLOW_SERVICE_HPP
