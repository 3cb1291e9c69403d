// The dashboards of pool and service handles (gf_pool_config.dashboard,
// gf_service_config.dashboard): kept beside the handle tables, stopped before their pool or
// service goes.
#pragma once

#include <cstdint>
#include <memory>

#include "dashboard/dashboard.hpp"

namespace gf::capi {

enum class DashboardOwner { kPool, kService };

void attach_dashboard(DashboardOwner owner, uint64_t handle,
                      std::unique_ptr<dashboard::Dashboard> dashboard);
// Stops and forgets the handle's dashboard, if it has one.
void stop_dashboard(DashboardOwner owner, uint64_t handle);
// The handle's dashboard URL, valid until stop_dashboard; nullptr when it has none.
const char *dashboard_url(DashboardOwner owner, uint64_t handle);

}  // namespace gf::capi
