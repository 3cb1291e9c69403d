// What UCX offers on this machine, as `ucx_info -d` lists it: every transport and device its
// components find, plus whether this UCX build can move CUDA memory (cuda_copy, cuda_ipc,
// gdr_copy). For `gpuflow doctor` (gf_data_plane_check): users of UCX lose days to not knowing
// which transports exist and which one a connection took.
#pragma once

#include <string>
#include <vector>

namespace gf::transport {

struct OfferedTransport {
  std::string component;  // "posix", "tcp", "ib", "cuda_cpy", …
  std::string transport;  // "posix", "tcp", "rc_verbs", "cuda_ipc", …
  std::string device;     // "memory", "lo", "eth0", "mlx5_0:1", …
  std::string kind;       // "network", "shared memory", "accelerator", "loopback"
};

struct Inventory {
  std::string version;  // UCX's, e.g. "1.13.1"
  std::string library;  // the libucp file loaded (GPUFLOW_UCX_LIBRARY, -DGPUFLOW_UCX_LIBRARY)
  std::vector<OfferedTransport> offered;
  bool cuda_aware = false;            // a CUDA component (cuda_cpy, cuda_ipc, gdr_copy) is present
  std::vector<std::string> problems;  // components that could not be opened, with UCX's reason
};

// Loads UCX (ucx_api.hpp) and queries every component; a component that fails goes to
// `problems`. Throws gf::Error only when UCX cannot be loaded.
Inventory inventory();

}  // namespace gf::transport
