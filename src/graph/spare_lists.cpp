#include "graph/spare_lists.hpp"

namespace gf {

SpareGraphLists &SpareGraphLists::instance() {
  static auto *spare = new SpareGraphLists;  // never destroyed: graphs may outlive static objects
  return *spare;
}

void SpareGraphLists::give_back(Graph::Lists &lists) {
  lists.clear();  // outside the mutex: the names go
  if (lists.capacity_bytes() > kKeptBytes) return;
  Graph::Lists dropped;  // the oldest set: freed once the mutex is released
  std::lock_guard lock(mu_);
  dropped.swap(kept_[1]);
  kept_[1].swap(kept_[0]);
  kept_[0].swap(lists);
}

void SpareGraphLists::take(Graph::Lists &lists) {
  std::lock_guard lock(mu_);
  const int larger = kept_[1].capacity_bytes() > kept_[0].capacity_bytes() ? 1 : 0;
  lists.swap(kept_[larger]);
}

size_t SpareGraphLists::kept_bytes() {
  std::lock_guard lock(mu_);
  return kept_[0].capacity_bytes() + kept_[1].capacity_bytes();
}

}  // namespace gf
