#include "service_client.hpp"

#include <cstdlib>

#include "exit_codes.hpp"

namespace gpuflow_cli {

std::string service_endpoint(const std::string &given) {
  if (!given.empty()) return given;
  const char *env = std::getenv("GPUFLOW_POOL");
  return env && *env ? env : gf_default_endpoint();
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
