// C shims: leases from the node's service.
#include <cmath>
#include <cstdint>

#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"
#include "client/lease_environment.hpp"
#include "core/error.hpp"
#include "core/request_bounds.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

client::LeaseAsk ask_of(const gf_lease_request &r) {
  client::LeaseAsk ask;
  if (!std::isfinite(r.gpus) || r.gpus < 0 || (r.gpus > 1 && r.gpus != std::floor(r.gpus))) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_lease_request.gpus is " + std::to_string(r.gpus) +
                                      ": use 0, a fraction below 1, or a whole number of devices");
  }
  if (!std::isfinite(r.cpus) || r.cpus < 0) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_lease_request.cpus must be finite and >= 0");
  }
  if (r.gpus == 0 && r.cpus == 0) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_lease_request asks for nothing (gpus and cpus are 0)");
  }
  if (r.device_count && !r.devices) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_lease_request.devices is NULL but device_count is not 0");
  }
  // The bounds the service holds every client to (gpuflow.h, "Shared pools"): checked here, so
  // that nothing is sent for a request it would refuse.
  std::string why = bounds::lease_devices_problem(
      "gf_lease_request.devices", r.device_count ? r.devices : nullptr, r.device_count);
  if (why.empty() && r.name) why = bounds::lease_name_problem("gf_lease_request.name", r.name);
  if (!why.empty()) fail(GF_ERR_INVALID_ARGUMENT, why);
  ask.gpus = r.gpus;
  ask.gpu_memory = r.gpu_memory;
  ask.cpus = r.cpus;
  if (r.device_count) ask.devices.assign(r.devices, r.devices + r.device_count);
  ask.priority = r.priority;
  ask.name = r.name ? r.name : "";
  return ask;
}

// The connection `l` is held on now. Its pool reconnected since that one ended (a restarted
// service, which kept the lease for this process): the lease is taken back there first, or, when
// the new service did not keep it, marked lost.
std::shared_ptr<client::Connection> held_on(LeaseObject &l) {
  std::lock_guard lock(l.mu);
  if (l.connection->alive() || !l.lost.empty()) return l.connection;
  std::shared_ptr<client::Connection> now = l.link->current();
  if (now == l.connection || !now->alive()) return l.connection;
  try {
    now->leases().reclaim(l.grant.lease_id);
    l.connection = std::move(now);
  } catch (const Error &e) {
    if (e.status() == GF_ERR_SYSTEM) return l.connection;  // gone again: the next call tries
    l.lost = "the gpuflow service at " + now->endpoint() + " restarted without lease " +
             std::to_string(l.grant.lease_id) + ": " + e.what();
  }
  return l.connection;
}

// An outage that a restarted service may end with the lease kept: the holder goes on meanwhile.
bool in_outage(const LeaseObject &l, const client::Connection &held) {
  return !held.alive() && l.link->redials();
}

}  // namespace

extern "C" {

GF_API gf_status gf_lease_acquire(gf_lease **out, gf_pool *pool, const gf_lease_request *request,
                                  int64_t timeout_ms) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    const gf_lease_request r = read_struct(request, "gf_lease_request");
    client::LeaseAsk ask = ask_of(r);
    std::shared_ptr<client::Connection> connection = connection_of(pool);
    auto lease = std::make_shared<LeaseObject>();
    lease->grant = connection->leases().acquire(ask, timeout_ms);
    lease->environment = client::lease_environment(lease->grant);
    lease->connection = std::move(connection);
    lease->link = pool_of(pool).link();
    *out = handle_from_bits<gf_lease>(leases().insert(std::move(lease)));
    return GF_OK;
  });
}

GF_API gf_status gf_lease_info(uint64_t *id, uint32_t *device_count, double *cpus,
                               const gf_lease *lease) {
  return guard([&] {
    const LeaseObject &l = lease_of(lease);
    if (id) *id = l.grant.lease_id;
    if (device_count) *device_count = static_cast<uint32_t>(l.grant.devices.size());
    if (cpus) *cpus = l.grant.cpus;
    return GF_OK;
  });
}

GF_API gf_status gf_lease_device_info(gf_lease_device *out, const gf_lease *lease, uint32_t index) {
  return guard([&] {
    checked_size(out, "gf_lease_device");
    const LeaseObject &l = lease_of(lease);
    if (index >= l.grant.devices.size()) {
      fail(GF_ERR_INVALID_ARGUMENT, "device index " + std::to_string(index) +
                                        " is out of range; the lease has " +
                                        std::to_string(l.grant.devices.size()));
    }
    const client::LeasedDevice &d = l.grant.devices[index];
    gf_lease_device info = GF_LEASE_DEVICE_INIT;
    info.ordinal = d.ordinal;
    info.uuid = d.uuid.c_str();
    info.pci_bus_id = d.pci_bus_id.c_str();
    info.share = d.share;
    info.memory = d.memory;
    write_struct(out, info, "gf_lease_device");
    return GF_OK;
  });
}

GF_API gf_status gf_lease_environment(const char **out, const gf_lease *lease) {
  return guard([&] {
    require_out(out, "out");
    *out = lease_of(lease).environment.c_str();
    return GF_OK;
  });
}

GF_API gf_status gf_lease_revoked(int32_t *out, const gf_lease *lease) {
  return guard([&] {
    require_out(out, "out");
    LeaseObject &l = lease_of(lease);
    const std::shared_ptr<client::Connection> held = held_on(l);
    std::lock_guard lock(l.mu);
    if (!l.lost.empty()) {
      *out = 1;
    } else {
      *out = !in_outage(l, *held) && held->leases().revoked(l.grant.lease_id) ? 1 : 0;
    }
    return GF_OK;
  });
}

GF_API gf_status gf_lease_bind_process_group(gf_lease *lease, int64_t process_group) {
  return guard([&] {
    LeaseObject &l = lease_of(lease);
    if (process_group <= 1 || process_group > INT32_MAX) {
      fail(GF_ERR_INVALID_ARGUMENT,
           "process_group " + std::to_string(process_group) + " is not a process group id");
    }
    held_on(l)->leases().bind_process_group(l.grant.lease_id, static_cast<int32_t>(process_group));
    return GF_OK;
  });
}

GF_API gf_status gf_lease_release(gf_lease *lease) {
  if (!lease) return GF_OK;
  return guard([&] {
    std::shared_ptr<LeaseObject> l = leases().remove(handle_bits(lease));
    if (!l) fail(GF_ERR_INVALID_HANDLE, "gf_lease is not a live handle (released already?)");
    const std::shared_ptr<client::Connection> held = held_on(*l);
    {
      std::lock_guard lock(l->mu);
      if (!l->lost.empty()) fail(GF_ERR_SYSTEM, l->lost);
    }
    if (in_outage(*l, *held)) {
      l->link->release_when_back(l->grant.lease_id);
      return GF_OK;
    }
    if (!held->alive()) {
      fail(GF_ERR_SYSTEM, "the gpuflow service at " + held->endpoint() +
                              " is gone; the lease ended with the connection");
    }
    held->leases().release(l->grant.lease_id);
    return GF_OK;
  });
}

}  // extern "C"
