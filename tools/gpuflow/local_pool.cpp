#include "local_pool.hpp"

#include "exit_codes.hpp"

namespace gpuflow_cli {

gf_pool *make_pool(const PoolOptions &options) {
  const gf_pool_config config = options.config();
  gf_pool *pool = nullptr;
  if (gf_pool_create(&pool, &config) != GF_OK) {
    library_error("cannot create the pool");
    return nullptr;
  }
  for (const std::string &plugin : options.plugins) {
    if (gf_pool_load_plugin(pool, plugin.c_str()) != GF_OK) {
      library_error("cannot load plugin");
      gf_pool_destroy(pool);
      return nullptr;
    }
  }
  return pool;
}

std::string emulation_reason(const PoolOptions &options, gf_pool *pool) {
  if (options.backend != GF_BACKEND_AUTO) return "";
  uint32_t devices = 0;
  gf_pool_device_count(&devices, pool);
  for (uint32_t d = 0; d < devices; ++d) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    if (gf_pool_device_info(&info, pool, d) == GF_OK && !info.emulated) return "";
  }
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_CUDA;
  config.cpu_workers = 1;
  gf_pool *probe = nullptr;
  if (gf_pool_create(&probe, &config) == GF_OK) {
    gf_pool_destroy(probe);
    return "";
  }
  return gf_last_error();
}

}  // namespace gpuflow_cli
