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

}  // namespace gf::capi
