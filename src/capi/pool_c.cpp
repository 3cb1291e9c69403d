// C shims: pools: creating one, its workers, ledgers and devices, its kernels and plugins, its
// event stream, and the status of the service it is connected to.
#include <cstdio>
#include <cstring>

#include "capi/bytes.hpp"
#include "capi/dashboards.hpp"
#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"
#include "core/request_bounds.hpp"
#include "status/status_render.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

Ledger::Line ledger_line(PoolCore &pool, const WorkerState &w, uint32_t index) {
  const auto lines = pool.scheduler().ledger_lines(w.index);
  if (index >= lines.size()) {
    fail(GF_ERR_INVALID_ARGUMENT, "ledger index " + std::to_string(index) + " is out of range; " +
                                      w.name + " has " + std::to_string(lines.size()) + " lines");
  }
  return lines[index];
}

const WorkerState &worker_at(PoolCore &pool, uint32_t worker) {
  if (worker >= pool.worker_count()) {
    fail(GF_ERR_INVALID_ARGUMENT, "worker index " + std::to_string(worker) +
                                      " is out of range; the pool has " +
                                      std::to_string(pool.worker_count()) + " workers");
  }
  return pool.worker(worker);
}

// Descriptions are read once, when the pool is built, so the strings outlive every call.
const DeviceDescription &device_at(PoolCore &pool, uint32_t device) {
  if (device >= pool.devices().size()) {
    fail(GF_ERR_INVALID_ARGUMENT, "device " + std::to_string(device) +
                                      " is out of range; the pool has " +
                                      std::to_string(pool.devices().size()) + " devices");
  }
  return pool.devices()[device];
}

void fill_entry(gf_ledger_entry *out, PoolCore &pool, const Ledger::Line &line) {
  gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
  e.resource = pool.scheduler().registry().name(line.resource).c_str();
  e.capacity = line.capacity.to_double();
  e.in_use = line.in_use.to_double();
  e.peak_in_use = line.peak.to_double();
  write_struct(out, e, "gf_ledger_entry");
}

}  // namespace

extern "C" {

GF_API void gf_pool_config_init(gf_pool_config *config, uint32_t struct_size) {
  gf_pool_config init = GF_POOL_CONFIG_INIT;
  init_bounded(config, init, struct_size);
}

GF_API gf_status gf_pool_create_versioned(gf_pool **out, const gf_pool_config *config,
                                          uint32_t header_version_major) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    if (header_version_major != GF_VERSION_MAJOR) {
      fail(GF_ERR_VERSION_MISMATCH, "the caller was built against gpuflow.h major version " +
                                        std::to_string(header_version_major) +
                                        ", this library is " + gf_version_string());
    }
    const gf_pool_config defaults = GF_POOL_CONFIG_INIT;
    gf_pool_config resolved = config ? read_struct(config, "gf_pool_config") : defaults;
    if (resolved.token_file) {
      const std::string why =
          bounds::bytes_over("gf_pool_config.token_file", std::strlen(resolved.token_file),
                             "GF_MAX_PATH_BYTES", bounds::kMaxPathBytes);
      if (!why.empty()) fail(GF_ERR_INVALID_ARGUMENT, why);
    }
    bool from_env = false;
    const std::string address =
        dashboard::requested_address(resolved.dashboard, "GPUFLOW_DASHBOARD", &from_env);
    std::shared_ptr<PoolCore> core = PoolCore::create(resolved);
    std::unique_ptr<dashboard::Dashboard> board;
    if (!address.empty()) {
      try {
        board = dashboard::Dashboard::for_pool(core, address);
      } catch (const Error &e) {
        // GPUFLOW_DASHBOARD names one port for a whole program, which may create several
        // pools: the first gets it, the others say so and run without one.
        if (!from_env) {
          core->shutdown();
          throw;
        }
        std::fprintf(stderr, "gpuflow: GPUFLOW_DASHBOARD: %s; this pool runs without one\n",
                     e.what());
      } catch (...) {
        core->shutdown();
        throw;
      }
    }
    const uint64_t bits = pools().insert(std::move(core));
    if (board) attach_dashboard(DashboardOwner::kPool, bits, std::move(board));
    *out = handle_from_bits<gf_pool>(bits);
    return GF_OK;
  });
}

GF_API void gf_pool_destroy(gf_pool *pool) {
  guard_void([&] {
    stop_dashboard(DashboardOwner::kPool, handle_bits(pool));
    if (auto core = pools().remove(handle_bits(pool))) core->shutdown();
  });
}

GF_API gf_status gf_pool_dashboard_url(const char **out, const gf_pool *pool) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    pool_of(pool);  // a valid handle
    const char *url = dashboard_url(DashboardOwner::kPool, handle_bits(pool));
    if (!url) fail(GF_ERR_NOT_FOUND, "this pool serves no dashboard (gf_pool_config.dashboard)");
    *out = url;
    return GF_OK;
  });
}

GF_API gf_status gf_pool_worker_count(uint32_t *out, const gf_pool *pool) {
  return guard([&] {
    require_out(out, "out");
    *out = static_cast<uint32_t>(pool_of(pool).worker_count());
    return GF_OK;
  });
}

GF_API gf_status gf_pool_worker_info(gf_worker_info *out, const gf_pool *pool, uint32_t worker) {
  return guard([&] {
    checked_size(out, "gf_worker_info");
    const WorkerState &w = worker_at(pool_of(pool), worker);
    gf_worker_info info = GF_WORKER_INFO_INIT;
    info.kind = w.kind;
    info.device = w.device;
    info.threads = w.threads;
    info.emulated = w.emulated ? 1 : 0;
    info.name = w.name.c_str();
    write_struct(out, info, "gf_worker_info");
    return GF_OK;
  });
}

GF_API gf_status gf_pool_ledger_size(uint32_t *out, const gf_pool *pool, uint32_t worker) {
  return guard([&] {
    require_out(out, "out");
    PoolCore &core = pool_of(pool);
    *out =
        static_cast<uint32_t>(core.scheduler().ledger_lines(worker_at(core, worker).index).size());
    return GF_OK;
  });
}

GF_API gf_status gf_pool_ledger_entry(gf_ledger_entry *out, const gf_pool *pool, uint32_t worker,
                                      uint32_t index) {
  return guard([&] {
    checked_size(out, "gf_ledger_entry");
    PoolCore &core = pool_of(pool);
    const WorkerState &w = worker_at(core, worker);
    fill_entry(out, core, ledger_line(core, w, index));
    return GF_OK;
  });
}

GF_API gf_status gf_pool_ledger_lookup(gf_ledger_entry *out, const gf_pool *pool, uint32_t worker,
                                       const char *resource) {
  return guard([&] {
    checked_size(out, "gf_ledger_entry");
    require_out(resource, "resource");
    PoolCore &core = pool_of(pool);
    const WorkerState &w = worker_at(core, worker);
    ResourceId id = core.scheduler().registry().find(resource);
    for (const auto &line : core.scheduler().ledger_lines(w.index)) {
      if (line.resource == id) {
        fill_entry(out, core, line);
        return GF_OK;
      }
    }
    fail(GF_ERR_NOT_FOUND, w.name + " does not advertise resource '" + resource + "'");
  });
}

}  // extern "C"

extern "C" {

GF_API gf_status gf_pool_device_count(uint32_t *out, const gf_pool *pool) {
  return guard([&] {
    require_out(out, "out");
    *out = static_cast<uint32_t>(pool_of(pool).scheduler().backend().device_count());
    return GF_OK;
  });
}

GF_API gf_status gf_pool_device_info(gf_device_info *out, const gf_pool *pool, uint32_t device) {
  return guard([&] {
    checked_size(out, "gf_device_info");
    const DeviceDescription &d = device_at(pool_of(pool), device);
    gf_device_info info = GF_DEVICE_INFO_INIT;
    info.ordinal = static_cast<int32_t>(device);
    info.emulated = d.emulated ? 1 : 0;
    info.total_memory = d.total_memory;
    info.pool_memory = d.memory_bytes;
    info.compute_major = d.compute_major;
    info.compute_minor = d.compute_minor;
    info.name = d.name.c_str();
    info.uuid = d.uuid.c_str();
    info.pci_bus_id = d.pci_bus_id.c_str();
    write_struct(out, info, "gf_device_info");
    return GF_OK;
  });
}

GF_API gf_status gf_pool_devices_source(const char **out, const gf_pool *pool) {
  return guard([&] {
    require_out(out, "out");
    *out = pool_of(pool).devices_source().c_str();
    return GF_OK;
  });
}

GF_API gf_status gf_pool_peer_access(int *out, const gf_pool *pool, uint32_t from, uint32_t to) {
  return guard([&] {
    require_out(out, "out");
    PoolCore &core = pool_of(pool);
    device_at(core, from);
    device_at(core, to);
    *out = from == to || core.scheduler().backend().peer_access(static_cast<int>(from),
                                                                static_cast<int>(to))
               ? 1
               : 0;
    return GF_OK;
  });
}

GF_API gf_status gf_pool_device_memory(gf_device_memory *out, const gf_pool *pool,
                                       uint32_t device) {
  return guard([&] {
    checked_size(out, "gf_device_memory");
    PoolCore &core = pool_of(pool);
    device_at(core, device);
    write_struct(out, core.scheduler().device_memory(static_cast<int>(device)), "gf_device_memory");
    return GF_OK;
  });
}

GF_API void gf_kernel_desc_init(gf_kernel_desc *desc, uint32_t struct_size) {
  gf_kernel_desc init = GF_KERNEL_DESC_INIT;
  init_bounded(desc, init, struct_size);
}

GF_API gf_status gf_pool_register_kernel(gf_pool *pool, const gf_kernel_desc *desc) {
  return guard([&] {
    gf_kernel_desc d = read_struct(desc, "gf_kernel_desc");
    pool_of(pool).kernels().add(d);
    return GF_OK;
  });
}

GF_API gf_status gf_pool_load_plugin(gf_pool *pool, const char *path) {
  return guard([&] {
    require_out(path, "path");
    pool_of(pool).kernels().load_plugin(path);
    return GF_OK;
  });
}

GF_API gf_status gf_pool_kernel_count(uint32_t *out, const gf_pool *pool) {
  return guard([&] {
    require_out(out, "out");
    *out = static_cast<uint32_t>(pool_of(pool).kernels().size());
    return GF_OK;
  });
}

GF_API gf_status gf_pool_kernel_name(const char **out, const gf_pool *pool, uint32_t index) {
  return guard([&] {
    require_out(out, "out");
    *out = pool_of(pool).kernels().name(index).c_str();
    return GF_OK;
  });
}

GF_API gf_status gf_pool_set_event_callback(gf_pool *pool, gf_event_fn callback, void *user_data) {
  return guard([&] {
    pool_of(pool).subscribe_events(callback, user_data);
    return GF_OK;
  });
}

GF_API gf_status gf_pool_service_status(gf_bytes *out, gf_pool *pool, gf_status_format format) {
  return guard([&] {
    require_out(out, "out");
    out->data = nullptr;
    out->size = 0;
    if (format != GF_STATUS_TEXT && format != GF_STATUS_JSON) {
      fail(GF_ERR_INVALID_ARGUMENT, "format must be GF_STATUS_TEXT or GF_STATUS_JSON");
    }
    const std::vector<uint8_t> reply = connection_of(pool)->leases().status();
    const wire::StatusReply &book = *wire::message_of(reply)->body_as_StatusReply();
    give_bytes(out, format == GF_STATUS_JSON ? status::json(book) : status::text(book));
    return GF_OK;
  });
}

}  // extern "C"
