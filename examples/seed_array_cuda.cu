// The seed workload's GPU bodies: Philox normals generated on the device, + 1, every other row
// and column, summed per chunk; and the two-input sum of the reduction tree. Each body only
// enqueues on the stream gpuflow hands it; the task completes when the stream does.
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include "seed_chunk.h"

namespace {

constexpr int kThreads = 256;
constexpr double kMean = 10.0, kAdd = 1.0;

__global__ void chunk_kernel(double *out, seed_chunk c) {
  const uint64_t n = static_cast<uint64_t>(c.rows) * static_cast<uint64_t>(c.cols);
  const uint64_t tid = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  curandStatePhilox4_32_10_t state;
  curand_init(c.seed, tid, 0, &state);
  double acc = 0.0;
  // Every element is drawn (x = normal(10, 1)); only global-even rows and columns are summed.
  for (uint64_t base = tid * 4; base < n; base += stride * 4) {
    float4 z = curand_normal4(&state);
    float zs[4] = {z.x, z.y, z.z, z.w};
    for (int k = 0; k < 4; ++k) {
      uint64_t i = base + k;
      if (i >= n) break;
      int64_t r = static_cast<int64_t>(i / c.cols), col = static_cast<int64_t>(i % c.cols);
      if (((c.row0 + r) & 1) == 0 && ((c.col0 + col) & 1) == 0) acc += kMean + zs[k] + kAdd;
    }
  }
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

__global__ void add_kernel(double *out, const double *a, const double *b) {
  *out = *a + *b;
}

}  // namespace

extern "C" int seed_chunk_gpu(gf_task_ctx *ctx, void *user_data) {
  const seed_chunk &c = *static_cast<const seed_chunk *>(user_data);
  gf_task_env env = GF_TASK_ENV_INIT;
  void *out = nullptr;
  if (gf_task_ctx_env(&env, ctx) != GF_OK ||
      gf_task_ctx_output(&out, ctx, 0, sizeof(double)) != GF_OK) {
    return 1;
  }
  cudaStream_t stream = static_cast<cudaStream_t>(env.stream);
  cudaMemsetAsync(out, 0, sizeof(double), stream);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, env.device);
  chunk_kernel<<<sms * 8, kThreads, 0, stream>>>(static_cast<double *>(out), c);
  return cudaPeekAtLastError() == cudaSuccess ? 0 : 1;
}

extern "C" int seed_sum_gpu(gf_task_ctx *ctx, void *) {
  gf_task_env env = GF_TASK_ENV_INIT;
  const void *a = nullptr, *b = nullptr;
  uint64_t na = 0, nb = 0;
  void *out = nullptr;
  if (gf_task_ctx_env(&env, ctx) != GF_OK || gf_task_ctx_input(&a, &na, ctx, 0) != GF_OK ||
      gf_task_ctx_input(&b, &nb, ctx, 1) != GF_OK ||
      gf_task_ctx_output(&out, ctx, 0, sizeof(double)) != GF_OK) {
    return 1;
  }
  add_kernel<<<1, 1, 0, static_cast<cudaStream_t>(env.stream)>>>(
      static_cast<double *>(out), static_cast<const double *>(a), static_cast<const double *>(b));
  return cudaPeekAtLastError() == cudaSuccess ? 0 : 1;
}
