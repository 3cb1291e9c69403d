#include "client/lease_environment.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/emulated_uuid.hpp"

namespace gf::client {

std::string lease_environment(const wire::Grant &grant) {
  const std::vector<wire::LeasedDevice> &devices = grant.devices;
  std::vector<std::string> uuids;
  std::string uuid_list, ordinal_list;
  for (const wire::LeasedDevice &d : devices) {
    uuids.push_back(d.uuid);
    uuid_list += (uuid_list.empty() ? "" : ",") + d.uuid;
    ordinal_list += (ordinal_list.empty() ? "" : ",") + std::to_string(d.ordinal);
  }
  std::string env;
  auto set = [&env](const char *name, const std::string &value) {
    env += std::string(name) + "=" + value + "\n";
  };
  set("CUDA_VISIBLE_DEVICES", uuid_list);
  set("NVIDIA_VISIBLE_DEVICES", devices.empty() ? "void" : uuid_list);
  set("GPUFLOW_DEVICES", ordinal_list);
  set("GPUFLOW_LEASE_ID", std::to_string(grant.lease_id));
  const int emulated_node = emulated_node_size(uuids);
  if (emulated_node > 0) {
    const auto least =
        std::min_element(devices.begin(), devices.end(),
                         [](const wire::LeasedDevice &a, const wire::LeasedDevice &b) {
                           return a.memory < b.memory;
                         });
    set("GPUFLOW_EMULATED_DEVICES", std::to_string(emulated_node));
    set("GPUFLOW_EMULATED_DEVICE_MEMORY", std::to_string(least->memory));
  }
  if (devices.size() == 1 && devices[0].share < 1) {
    const wire::LeasedDevice &d = devices[0];
    set("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        std::to_string(static_cast<int>(std::ceil(d.share * 100))));
    set("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + std::to_string(d.memory >> 20) + "M");
  }
  return env;
}

}  // namespace gf::client
