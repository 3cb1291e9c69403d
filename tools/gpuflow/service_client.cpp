#include "service_client.hpp"

#include <sys/stat.h>

#include <cstdlib>

#include "exit_codes.hpp"

namespace gpuflow_cli {

namespace {

bool socket_at(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

std::string system_socket_path() {
  const char *env = std::getenv("GPUFLOW_SYSTEM_SOCKET");
  return env && *env ? env : "/run/gpuflow/gpuflow.sock";
}

std::string default_client_endpoint() {
  static const std::string kUnix = "unix://";
  const std::string own = gf_default_endpoint();
  if (socket_at(own.substr(kUnix.size()))) return own;
  const std::string system = system_socket_path();
  if (socket_at(system)) return kUnix + system;
  return own;
}

std::string service_endpoint(const std::string &given) {
  if (!given.empty()) return given;
  const char *env = std::getenv("GPUFLOW_POOL");
  return env && *env ? env : default_client_endpoint();
}

gf_pool *connect_to_service(const std::string &given, const std::string &token_file) {
  const std::string endpoint = service_endpoint(given);
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.endpoint = endpoint.c_str();
  config.cpu_workers = -1;
  config.token_file = token_file.empty() ? nullptr : token_file.c_str();
  gf_pool *pool = nullptr;
  if (gf_pool_create(&pool, &config) != GF_OK) {
    library_error("cannot reach the gpuflow service");
    return nullptr;
  }
  return pool;
}

}  // namespace gpuflow_cli
