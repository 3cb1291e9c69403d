// Small kernels the GPU tests launch from task bodies.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void fill(uint32_t *out, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = seed * 2654435761u + static_cast<uint32_t>(i);
  }
}

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

extern "C" int gft_launch_fill(void *out, size_t n, uint32_t seed, void *stream) {
  fill<<<256, 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<uint32_t *>(out), n, seed);
  return static_cast<int>(cudaPeekAtLastError());
}

extern "C" int gft_launch_spin(long long cycles, void *stream) {
  spin<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(cycles);
  return static_cast<int>(cudaPeekAtLastError());
}

__global__ void fault() {
  __trap();
}

// A launch the device refuses (more threads per block than any GPU allows), returned as a
// careful body does: this file has its own CUDA runtime (static cudart), whose per-thread error
// state gpuflow's runtime cannot read.
extern "C" int gft_launch_invalid(void *stream) {
  spin<<<1, 4096, 0, static_cast<cudaStream_t>(stream)>>>(1);
  return static_cast<int>(cudaGetLastError());
}

// A kernel that faults on the device, launched by a careless body that returns 0: the error
// reaches the stream, which gpuflow watches whichever runtime launched the kernel.
extern "C" int gft_launch_fault(void *stream) {
  fault<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>();
  return 0;
}
