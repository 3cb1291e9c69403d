#include "client/lease_environment.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/emulated_uuid.hpp"

namespace gf::client {
namespace {

using wire::LeasedDevice;

template <class Item>
std::string joined(const std::vector<LeasedDevice> &devices, Item item) {
  std::string out;
  for (const LeasedDevice &d : devices) out += (out.empty() ? "" : ",") + item(d);
  return out;
}

}  // namespace

std::vector<EnvironmentEntry> lease_environment(const wire::Grant &grant) {
  const std::vector<LeasedDevice> &devices = grant.devices;
  const std::string uuids = joined(devices, [](const LeasedDevice &d) { return d.uuid; });
  std::vector<EnvironmentEntry> env{
      {"CUDA_VISIBLE_DEVICES", uuids},
      {"NVIDIA_VISIBLE_DEVICES", devices.empty() ? "void" : uuids},
      {"GPUFLOW_DEVICES",
       joined(devices, [](const LeasedDevice &d) { return std::to_string(d.ordinal); })},
      {"GPUFLOW_LEASE_ID", std::to_string(grant.lease_id)},
  };
  int emulated_node = 0;
  uint64_t least_memory = UINT64_MAX;
  for (const LeasedDevice &d : devices) {
    const int ordinal = emulated_ordinal(d.uuid);
    if (ordinal < 0) {
      emulated_node = 0;
      break;
    }
    emulated_node = std::max(emulated_node, ordinal + 1);
    least_memory = std::min(least_memory, d.memory);
  }
  if (emulated_node > 0) {
    env.emplace_back("GPUFLOW_EMULATED_DEVICES", std::to_string(emulated_node));
    env.emplace_back("GPUFLOW_EMULATED_DEVICE_MEMORY", std::to_string(least_memory));
  }
  if (devices.size() == 1 && devices[0].share < 1) {
    const LeasedDevice &d = devices[0];
    env.emplace_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                     std::to_string(static_cast<int>(std::ceil(d.share * 100))));
    env.emplace_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                     "0=" + std::to_string(d.memory >> 20) + "M");
  }
  return env;
}

std::string environment_lines(const std::vector<EnvironmentEntry> &entries) {
  std::string out;
  for (const auto &[name, value] : entries) out += name + "=" + value + "\n";
  return out;
}

}  // namespace gf::client
