#include "capi/dashboards.hpp"

#include <map>
#include <mutex>
#include <utility>

namespace gf::capi {

namespace {

std::mutex &table_mutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::pair<DashboardOwner, uint64_t>, std::unique_ptr<dashboard::Dashboard>> &table() {
  static auto *t =
      new std::map<std::pair<DashboardOwner, uint64_t>, std::unique_ptr<dashboard::Dashboard>>();
  return *t;  // never destroyed: handles may be destroyed from exit handlers
}

}  // namespace

void attach_dashboard(DashboardOwner owner, uint64_t handle,
                      std::unique_ptr<dashboard::Dashboard> dashboard) {
  std::lock_guard lock(table_mutex());
  table()[{owner, handle}] = std::move(dashboard);
}

void stop_dashboard(DashboardOwner owner, uint64_t handle) {
  std::unique_ptr<dashboard::Dashboard> d;
  {
    std::lock_guard lock(table_mutex());
    auto it = table().find({owner, handle});
    if (it == table().end()) return;
    d = std::move(it->second);
    table().erase(it);
  }
  d->stop();
}

const char *dashboard_url(DashboardOwner owner, uint64_t handle) {
  std::lock_guard lock(table_mutex());
  auto it = table().find({owner, handle});
  return it == table().end() ? nullptr : it->second->url().c_str();
}

}  // namespace gf::capi
