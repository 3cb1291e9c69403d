#include "capi/objects.hpp"

namespace gf::capi {

PoolTable &pools() {
  static auto *table = new PoolTable;
  return *table;
}

GraphTable &graphs() {
  static auto *table = new GraphTable;
  return *table;
}

RunTable &runs() {
  static auto *table = new RunTable;
  return *table;
}

LeaseTable &leases() {
  static auto *table = new LeaseTable;
  return *table;
}

ServiceTable &services() {
  static auto *table = new ServiceTable;
  return *table;
}

std::shared_ptr<client::Connection> connection_of(gf_pool *pool) {
  std::shared_ptr<client::Connection> connection = pool_of(pool).connection();
  if (!connection) {
    fail(GF_ERR_STATE,
         "the pool is embedded (private to this process): leases and the service's status come "
         "from a shared pool; create the pool with gf_pool_config.endpoint or GPUFLOW_POOL set "
         "to the service's socket (start one with `gpuflow serve`)");
  }
  return connection;
}

}  // namespace gf::capi
