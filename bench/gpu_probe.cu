// A small probe of what a process sees of its GPU, for the GPU kit's checks
// (scripts/gpu-kit-run.sh) and for jobs run under `gpuflow lease`. Plain CUDA, no gpuflow; prints
// one JSON line.
//   gpu_probe info                   CUDA_VISIBLE_DEVICES, the MPS variables, the devices seen
//   gpu_probe alloc MIB [HOLD_S]     cudaMalloc MIB of device memory on device 0, touch it, hold
//                                    it HOLD_S seconds (default 0), free it
//   gpu_probe alloc-frac F [HOLD_S]  the same with F (0 < F < 1) of device 0's total memory
//   gpu_probe bandwidth [MIB]        plain cudaMemcpy host<->device, pinned and pageable (default
//   1024)
// Device memory only (cudaMalloc), never managed memory, and never more than the card has.
// Exit codes: 0 done, 2 no usable device (or usage), 3 the allocation was refused, 1 other errors.
#include <cuda_runtime.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char *env_or(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v ? v : fallback;
}

// JSON string escaping for the few fields that come from the environment.
std::string quoted(const char *s) {
  std::string out = "\"";
  for (const char *p = s; *p; ++p) {
    if (*p == '"' || *p == '\\') {
      out += '\\';
      out += *p;
    } else if (static_cast<unsigned char>(*p) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", *p);
      out += buf;
    } else {
      out += *p;
    }
  }
  return out + "\"";
}

std::string uuid_text(const cudaUUID_t &u) {
  char buf[64];
  const auto *b = reinterpret_cast<const unsigned char *>(u.bytes);
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

// The common head of every line: who asked, what the environment says.
std::string head(const char *what) {
  std::string s = "{\"probe\": \"" + std::string(what) + "\", \"pid\": " + std::to_string(getpid());
  s += ", \"cuda_visible_devices\": " + quoted(env_or("CUDA_VISIBLE_DEVICES", "(unset)"));
  s += ", \"gpuflow_lease_id\": " + quoted(env_or("GPUFLOW_LEASE_ID", ""));
  s += ", \"mps_active_thread_percentage\": " +
       quoted(env_or("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", ""));
  s += ", \"mps_pinned_device_mem_limit\": " +
       quoted(env_or("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ""));
  return s;
}

int no_device(const char *what, cudaError_t e) {
  std::printf("%s, \"ok\": false, \"error\": %s}\n", head(what).c_str(),
              quoted(cudaGetErrorString(e)).c_str());
  std::fprintf(stderr, "gpu_probe: no usable CUDA device: %s\n", cudaGetErrorString(e));
  return 2;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int info() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) return no_device("info", e);
  std::string s = head("info") + ", \"devices\": [";
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, d);
    char bus[32] = "";
    cudaDeviceGetPCIBusId(bus, sizeof bus, d);
    s += (d ? ", " : "") + std::string("{\"ordinal\": ") + std::to_string(d) +
         ", \"name\": " + quoted(p.name) + ", \"uuid\": \"" + uuid_text(p.uuid) +
         "\", \"pci_bus_id\": \"" + bus +
         "\", \"memory_mib\": " + std::to_string(p.totalGlobalMem >> 20) + ", \"cc\": \"" +
         std::to_string(p.major) + "." + std::to_string(p.minor) +
         "\", \"sms\": " + std::to_string(p.multiProcessorCount) + "}";
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  s += "], \"driver_api\": " + std::to_string(driver) +
       ", \"runtime_api\": " + std::to_string(runtime) + ", \"ok\": true}";
  std::printf("%s\n", s.c_str());
  return 0;
}

int alloc(size_t bytes, double hold_s, const char *what) {
  size_t free_b = 0, total_b = 0;
  cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
  if (e != cudaSuccess) return no_device(what, e);
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  std::string s = head(what) + ", \"device\": " + quoted(p.name) + ", \"uuid\": \"" +
                  uuid_text(p.uuid) + "\", \"total_mib\": " + std::to_string(total_b >> 20) +
                  ", \"free_mib\": " + std::to_string(free_b >> 20) +
                  ", \"alloc_mib\": " + std::to_string(bytes >> 20);
  if (bytes > total_b) {  // never ask for more than the card has
    std::printf("%s, \"ok\": false, \"error\": \"more than the device's memory\"}\n", s.c_str());
    return 1;
  }
  void *ptr = nullptr;
  e = cudaMalloc(&ptr, bytes);
  if (e == cudaSuccess) e = cudaMemset(ptr, 0x5a, bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (ptr) cudaFree(ptr);
    std::printf("%s, \"ok\": false, \"refused\": true, \"error\": %s}\n", s.c_str(),
                quoted(cudaGetErrorString(e)).c_str());
    return 3;
  }
  size_t free_after = 0;
  cudaMemGetInfo(&free_after, &total_b);
  std::printf("%s, \"free_after_mib\": %zu, \"held_s\": %.1f, \"ok\": true}\n", s.c_str(),
              free_after >> 20, hold_s);
  std::fflush(stdout);
  if (hold_s > 0) usleep(static_cast<useconds_t>(hold_s * 1e6));
  cudaFree(ptr);
  return 0;
}

double copy_gb_s(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up
    double t0 = now();
    if (cudaMemcpy(dst, src, bytes, kind) != cudaSuccess) return 0;
    double t = now() - t0;
    if (rep > 0 && t < best) best = t;
  }
  return static_cast<double>(bytes) / best / 1e9;
}

int bandwidth(size_t bytes) {
  void *dev = nullptr;
  cudaError_t e = cudaMalloc(&dev, bytes);
  if (e != cudaSuccess) return no_device("bandwidth", e);
  void *pinned = nullptr;
  if (cudaMallocHost(&pinned, bytes) != cudaSuccess) {
    std::fprintf(stderr, "gpu_probe: cudaMallocHost of %zu bytes failed\n", bytes);
    cudaFree(dev);
    return 1;
  }
  std::vector<char> pageable(bytes, 1);
  std::memset(pinned, 1, bytes);
  const double h2d_pinned = copy_gb_s(dev, pinned, bytes, cudaMemcpyHostToDevice);
  const double d2h_pinned = copy_gb_s(pinned, dev, bytes, cudaMemcpyDeviceToHost);
  const double h2d_pageable = copy_gb_s(dev, pageable.data(), bytes, cudaMemcpyHostToDevice);
  const double d2h_pageable = copy_gb_s(pageable.data(), dev, bytes, cudaMemcpyDeviceToHost);
  std::printf(
      "%s, \"bytes\": %zu, \"h2d_pinned_gb_s\": %.2f, \"d2h_pinned_gb_s\": %.2f, "
      "\"h2d_pageable_gb_s\": %.2f, \"d2h_pageable_gb_s\": %.2f, \"ok\": true}\n",
      head("bandwidth").c_str(), bytes, h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable);
  cudaFreeHost(pinned);
  cudaFree(dev);
  return h2d_pinned > 0 && d2h_pinned > 0 ? 0 : 1;
}

int usage() {
  std::fprintf(stderr,
               "usage: gpu_probe info | alloc MIB [HOLD_S] | alloc-frac F [HOLD_S] | "
               "bandwidth [MIB]\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  const double hold = argc > 3 ? std::atof(argv[3]) : 0.0;
  if (cmd == "info") return info();
  if (cmd == "alloc" && argc > 2) {
    const long long mib = std::atoll(argv[2]);
    if (mib <= 0) return usage();
    return alloc(static_cast<size_t>(mib) << 20, hold, "alloc");
  }
  if (cmd == "alloc-frac" && argc > 2) {
    const double f = std::atof(argv[2]);
    if (!(f > 0 && f < 1)) return usage();
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) return no_device("alloc-frac", e);
    const size_t bytes =
        static_cast<size_t>(f * static_cast<double>(total_b)) & ~((size_t{1} << 20) - 1);
    return alloc(bytes, hold, "alloc-frac");
  }
  if (cmd == "bandwidth") {
    const long long mib = argc > 2 ? std::atoll(argv[2]) : 1024;
    if (mib <= 0) return usage();
    return bandwidth(static_cast<size_t>(mib) << 20);
  }
  return usage();
}
