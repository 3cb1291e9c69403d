// The published layouts of every struct_size-versioned struct of gpuflow.h: for each struct, the
// sizes its layouts have had, oldest first, each given by the last field of that layout, and the
// defaults (its INIT macro) for fields an older caller does not have.
//
// When a field is appended to a struct in gpuflow.h, append GF_LAYOUT_END(struct, new_field) to
// its list here: the static_assert below fails until that is done, so an older caller's size
// never silently stops being accepted. tests/abi/old_layouts.c keeps the layouts themselves.
//
// gf_event is not listed: the library fills it and sets struct_size itself, and a caller reads
// the prefix it knows.
#pragma once

#include <gpuflow.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace gf::capi {

// The size of a layout of T that ends with a field ending at byte `end`: padded to T's alignment.
// (Every layout of every struct here already had a pointer or 64-bit member, so older layouts
// have today's alignment.)
template <class T>
constexpr uint32_t layout_size(size_t end) {
  return static_cast<uint32_t>((end + alignof(T) - 1) / alignof(T) * alignof(T));
}

#define GF_LAYOUT_END(T, field) layout_size<T>(offsetof(T, field) + sizeof(T::field))

template <class T>
struct Layout;

#define GF_LAYOUT(T, INIT, ...)                                                      \
  template <>                                                                        \
  struct Layout<T> {                                                                 \
    static constexpr std::array kSizes{__VA_ARGS__};                                 \
    static T defaults() { return INIT; }                                             \
    static_assert(kSizes.back() == sizeof(T),                                        \
                  "a field was appended to " #T ": append GF_LAYOUT_END(" #T         \
                  ", <new field>) to its GF_LAYOUT in "                              \
                  "src/capi/layouts.hpp and its layout to tests/abi/old_layouts.c"); \
  }

// Appended in 0.1: devices, device_count, device_memory_limit, spill_threshold.
GF_LAYOUT(gf_pool_config, GF_POOL_CONFIG_INIT,
          GF_LAYOUT_END(gf_pool_config, gpu_worker_label_count),
          GF_LAYOUT_END(gf_pool_config, spill_threshold), GF_LAYOUT_END(gf_pool_config, endpoint),
          GF_LAYOUT_END(gf_pool_config, dashboard), GF_LAYOUT_END(gf_pool_config, token_file));
// Appended in 0.1: kernel and command (graphs as files), then cost_key.
GF_LAYOUT(gf_task_desc, GF_TASK_DESC_INIT, GF_LAYOUT_END(gf_task_desc, after_count),
          GF_LAYOUT_END(gf_task_desc, command), GF_LAYOUT_END(gf_task_desc, cost_key));
// One published layout each, so far.
GF_LAYOUT(gf_worker_info, GF_WORKER_INFO_INIT, GF_LAYOUT_END(gf_worker_info, name));
GF_LAYOUT(gf_ledger_entry, GF_LEDGER_ENTRY_INIT, GF_LAYOUT_END(gf_ledger_entry, peak_in_use));
GF_LAYOUT(gf_device_info, GF_DEVICE_INFO_INIT, GF_LAYOUT_END(gf_device_info, pci_bus_id));
GF_LAYOUT(gf_device_memory, GF_DEVICE_MEMORY_INIT,
          GF_LAYOUT_END(gf_device_memory, unspilled_total));
GF_LAYOUT(gf_buffer_desc, GF_BUFFER_DESC_INIT, GF_LAYOUT_END(gf_buffer_desc, flags));
GF_LAYOUT(gf_submit_options, GF_SUBMIT_OPTIONS_INIT, GF_LAYOUT_END(gf_submit_options, user_data),
          GF_LAYOUT_END(gf_submit_options, where));
GF_LAYOUT(gf_run_stats, GF_RUN_STATS_INIT, GF_LAYOUT_END(gf_run_stats, elapsed_s));
GF_LAYOUT(gf_task_env, GF_TASK_ENV_INIT, GF_LAYOUT_END(gf_task_env, task_name));
GF_LAYOUT(gf_kernel_desc, GF_KERNEL_DESC_INIT, GF_LAYOUT_END(gf_kernel_desc, user_data_destroy));
GF_LAYOUT(gf_command_desc, GF_COMMAND_DESC_INIT, GF_LAYOUT_END(gf_command_desc, log_dir));
// Appended in 0.3: dashboard; 0.5: plugins; 0.6: listen, token_file; 0.7: job_kill_grace_s;
// 0.8: listen_fd.
GF_LAYOUT(gf_service_config, GF_SERVICE_CONFIG_INIT, GF_LAYOUT_END(gf_service_config, user_weights),
          GF_LAYOUT_END(gf_service_config, dashboard),
          GF_LAYOUT_END(gf_service_config, plugin_count),
          GF_LAYOUT_END(gf_service_config, token_file),
          GF_LAYOUT_END(gf_service_config, job_kill_grace_s),
          GF_LAYOUT_END(gf_service_config, listen_fd));
GF_LAYOUT(gf_lease_request, GF_LEASE_REQUEST_INIT, GF_LAYOUT_END(gf_lease_request, name));
GF_LAYOUT(gf_lease_device, GF_LEASE_DEVICE_INIT, GF_LAYOUT_END(gf_lease_device, memory));
// Published in 0.2.
GF_LAYOUT(gf_value_ops, GF_VALUE_OPS_INIT, GF_LAYOUT_END(gf_value_ops, user_data));

#undef GF_LAYOUT

}  // namespace gf::capi
