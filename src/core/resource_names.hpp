// Names the runtime itself gives meaning to. Every other resource name is a user label.
#pragma once

namespace gf::resource_names {

inline constexpr const char *kCpu = "cpu";
inline constexpr const char *kGpu = "GPU";
inline constexpr const char *kGpuMemory = "gpu_memory";

}  // namespace gf::resource_names
