// What a process running on a lease needs in its environment to use exactly the leased devices:
// one definition for every way a job gets a lease (gf_lease_environment, `gpuflow lease`, the
// Python binding's Dask workers), so they cannot drift apart.
#pragma once

#include <string>

#include "wire/records.hpp"

namespace gf::client {

// "NAME=value" lines, each ended by '\n', in this order:
// - CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES: the devices by UUID ("void" for a lease
//   of CPUs alone, to container runtimes), so CUDA and containers see those devices only;
// - GPUFLOW_DEVICES: their ordinals as the service numbers them; GPUFLOW_LEASE_ID;
// - for emulated devices (named as this library names them), GPUFLOW_EMULATED_DEVICES and
//   GPUFLOW_EMULATED_DEVICE_MEMORY: a pool started in the job emulates the node up to the
//   highest leased device, at the leased memory, so the UUIDs above name exactly those;
// - for a share of one device, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
//   CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, which NVIDIA MPS enforces where it runs.
std::string lease_environment(const wire::Grant &grant);

}  // namespace gf::client
