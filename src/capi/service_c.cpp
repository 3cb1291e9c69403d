// C shims: running the node's service in this process.
#include <pwd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "capi/dashboards.hpp"
#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"
#include "core/host_port.hpp"
#include "core/request_bounds.hpp"
#include "service/listener.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

double non_negative(double value, const char *field) {
  if (!(value >= 0 && value <= 1e12)) {
    fail(GF_ERR_INVALID_ARGUMENT,
         std::string("gf_service_config.") + field + " must be a finite number >= 0");
  }
  return value;
}

// "alice=3,bob=1,1001=2" -> uid -> weight.
std::map<uint32_t, double> parse_user_weights(const char *text) {
  std::map<uint32_t, double> out;
  if (!text) return out;
  std::string list = text;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(start, end - start);
    start = end + 1;
    const size_t eq = item.find('=');
    const std::string user = item.substr(0, eq);
    char *rest = nullptr;
    const double weight = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &rest);
    if (user.empty() || eq == std::string::npos || !rest || *rest || !(weight > 0) ||
        weight > 1e6) {
      fail(GF_ERR_INVALID_ARGUMENT, "gf_service_config.user_weights: '" + item +
                                        "' is not USER=WEIGHT with a weight in (0, 1e6]");
    }
    char *digits_end = nullptr;
    const unsigned long uid = std::strtoul(user.c_str(), &digits_end, 10);
    if (*digits_end == '\0') {
      out[static_cast<uint32_t>(uid)] = weight;
      continue;
    }
    struct passwd entry {};
    struct passwd *found = nullptr;
    std::vector<char> buffer(1 << 14);
    if (::getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
      fail(GF_ERR_INVALID_ARGUMENT, "gf_service_config.user_weights: no user named '" + user + "'");
    }
    out[found->pw_uid] = weight;
  }
  return out;
}

// The policy fields of a config, checked as gf_service_start and gf_service_update_policy
// both check them.
service::Policy policy_of(const gf_service_config &c) {
  service::Policy policy;
  policy.usage_half_life_s =
      c.usage_half_life_s > 0 ? non_negative(c.usage_half_life_s, "usage_half_life_s") : 300.0;
  policy.client_gpu_cap = non_negative(c.client_gpu_cap, "client_gpu_cap");
  policy.user_gpu_cap = non_negative(c.user_gpu_cap, "user_gpu_cap");
  policy.user_weights = parse_user_weights(c.user_weights);
  return policy;
}

// TLS for the listener, from the environment (gf_service_config has no fields for it yet;
// `gpuflow serve` sets these from its options): TLS unless plain TCP is asked for by name.
void remote_security_of(service::ServiceOptions &options) {
  auto env = [](const char *name) {
    const char *v = std::getenv(name);
    return std::string(v ? v : "");
  };
  options.tls = {env("GPUFLOW_SERVE_TLS_CERT"), env("GPUFLOW_SERVE_TLS_KEY"),
                 env("GPUFLOW_SERVE_TLS_CLIENT_CA")};
  const std::string insecure = env("GPUFLOW_SERVE_INSECURE_LISTEN");
  if (!insecure.empty() && insecure != "0" && insecure != "1") {
    fail(GF_ERR_INVALID_ARGUMENT,
         "GPUFLOW_SERVE_INSECURE_LISTEN is '" + insecure + "': it must be 1 (or 0, or unset)");
  }
  options.insecure_listen = insecure == "1";
  if (options.insecure_listen && !options.tls.certificate.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT,
         "GPUFLOW_SERVE_INSECURE_LISTEN=1 with GPUFLOW_SERVE_TLS_CERT: plain TCP or TLS, not "
         "both (gpuflow serve: --insecure-listen or --tls-cert)");
  }
  const std::string devices = env("GPUFLOW_SERVE_TRUSTED_DEVICES");
  for (size_t at = 0; at < devices.size();) {
    const size_t comma = std::min(devices.find(',', at), devices.size());
    if (comma > at) options.trusted_data_devices.push_back(devices.substr(at, comma - at));
    at = comma + 1;
  }
}

}  // namespace

extern "C" {

GF_API gf_status gf_service_start(gf_service **out, const gf_service_config *config) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    gf_service_config defaults = GF_SERVICE_CONFIG_INIT;
    const gf_service_config c = config ? read_struct(config, "gf_service_config") : defaults;
    service::ServiceOptions options;
    const gf_pool_config pool_defaults = GF_POOL_CONFIG_INIT;
    options.pool =
        resolve_pool_options(c.pool ? read_struct(c.pool, "gf_pool_config") : pool_defaults);
    // Paths within gpuflow.h's bounds, named as the caller set them.
    for (const auto &[field, value, bound_name, bound] :
         {std::tuple<const char *, const char *, const char *, size_t>{
              "gf_service_config.socket_path", c.socket_path, "GF_MAX_SOCKET_PATH_BYTES",
              bounds::kMaxSocketPathBytes},
          {"gf_service_config.token_file", c.token_file, "GF_MAX_PATH_BYTES",
           bounds::kMaxPathBytes}}) {
      if (!value) continue;
      const std::string why = bounds::bytes_over(field, std::strlen(value), bound_name, bound);
      if (!why.empty()) fail(GF_ERR_INVALID_ARGUMENT, why);
    }
    options.socket_path = c.socket_path ? c.socket_path : "";
    options.group = c.group ? c.group : "";
    options.policy = policy_of(c);
    // The subtree for jobs' cgroups: a setting of the node's installation (gpuflow serve's
    // --cgroup-root), not of a program that embeds a service.
    if (const char *root = std::getenv("GPUFLOW_CGROUP_ROOT")) options.cgroup_root = root;
    // 0 is "none": fds 0-2 are never handed over.
    if (c.listen_fd != 0) {
      service::listening_socket_path(c.listen_fd, "gf_service_config.listen_fd");  // if bad
      options.listen_fd = c.listen_fd;
    }
    if (c.log) {
      options.log = [log = c.log, user = c.log_user_data](const std::string &line) {
        log(line.c_str(), user);
      };
    }
    if (c.plugin_count > 0 && !c.plugins) {
      fail(GF_ERR_INVALID_ARGUMENT, "gf_service_config.plugins is NULL but plugin_count is " +
                                        std::to_string(c.plugin_count));
    }
    for (uint32_t i = 0; i < c.plugin_count; ++i) {
      if (!c.plugins[i]) {
        fail(GF_ERR_INVALID_ARGUMENT,
             "gf_service_config.plugins[" + std::to_string(i) + "] is NULL");
      }
      options.plugins.push_back(c.plugins[i]);
    }
    if (c.listen && *c.listen) {
      core::parse_address(c.listen, "gf_service_config.listen");  // refused here if bad
      if (!c.token_file || !*c.token_file) {
        fail(GF_ERR_INVALID_ARGUMENT,
             "gf_service_config.listen needs token_file: remote clients must show a token");
      }
      options.listen = c.listen;
      options.token_file = c.token_file;
      remote_security_of(options);
    }
    if (!std::isfinite(c.job_kill_grace_s) || c.job_kill_grace_s < 0 ||
        c.job_kill_grace_s > 86400) {
      fail(GF_ERR_INVALID_ARGUMENT,
           "gf_service_config.job_kill_grace_s must be between 0 and 86400 seconds");
    }
    if (c.job_kill_grace_s > 0) options.job_kill_grace_s = c.job_kill_grace_s;
    std::string address;
    if (c.dashboard && *c.dashboard) {
      dashboard::parse_address(c.dashboard, "gf_service_config.dashboard");  // refused here if bad
      address = c.dashboard;
    }
    std::shared_ptr<service::Server> server = service::Server::start(std::move(options));
    std::unique_ptr<dashboard::Dashboard> board;
    if (!address.empty()) {
      try {
        board = dashboard::Dashboard::for_service(*server, address);
      } catch (...) {
        server->stop();
        throw;
      }
    }
    const uint64_t bits = services().insert(std::move(server));
    if (board) attach_dashboard(DashboardOwner::kService, bits, std::move(board));
    *out = handle_from_bits<gf_service>(bits);
    return GF_OK;
  });
}

GF_API gf_status gf_service_update_policy(gf_service *service, const gf_service_config *config) {
  return guard([&] {
    // A gf_service_stop on another thread meanwhile does not free it under us: the service
    // then refuses, as a stopped one.
    const auto server = lookup_shared(services(), service, "gf_service");
    server->update_policy(policy_of(read_struct(config, "gf_service_config")));
    return GF_OK;
  });
}

GF_API const char *gf_default_endpoint(void) {
  static const std::string endpoint = "unix://" + client::default_socket_path();
  return endpoint.c_str();
}

GF_API const char *gf_service_endpoint(const gf_service *service) {
  const char *endpoint = nullptr;
  guard_void([&] { endpoint = service_of(service).endpoint().c_str(); });
  return endpoint;
}

GF_API const char *gf_service_remote_endpoint(const gf_service *service) {
  const char *endpoint = nullptr;
  guard_void([&] {
    const std::string &remote = service_of(service).remote_endpoint();
    endpoint = remote.empty() ? nullptr : remote.c_str();
  });
  return endpoint;
}

GF_API const char *gf_service_dashboard_url(const gf_service *service) {
  const char *url = nullptr;
  guard_void([&] {
    service_of(service);
    url = dashboard_url(DashboardOwner::kService, handle_bits(service));
  });
  return url;
}

GF_API void gf_service_stop(gf_service *service) {
  guard_void([&] {
    stop_dashboard(DashboardOwner::kService, handle_bits(service));
    if (auto server = services().remove(handle_bits(service))) server->stop();
  });
}

}  // extern "C"
