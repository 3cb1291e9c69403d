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

}  // namespace gf::capi
