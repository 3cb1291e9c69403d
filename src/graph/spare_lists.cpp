#include "graph/spare_lists.hpp"

namespace gf {

SpareGraphLists &SpareGraphLists::instance() {
  static auto *spare = new SpareGraphLists;  // never destroyed: graphs may outlive static objects
  return *spare;
}

void SpareGraphLists::give_back(Graph::Lists &lists) {
  lists.clear();  // outside the mutex: the names go
  if (lists.capacity_bytes() > kKeptBytes) return;
  Graph::Lists dropped;  // an older set: freed once the mutex is released
  std::lock_guard lock(mu_);
  dropped.swap(kept_);
  kept_.swap(lists);
}

void SpareGraphLists::take(Graph::Lists &lists) {
  std::lock_guard lock(mu_);
  lists.swap(kept_);
}

size_t SpareGraphLists::kept_bytes() {
  std::lock_guard lock(mu_);
  return kept_.capacity_bytes();
}

}  // namespace gf
