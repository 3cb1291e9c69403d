// GPU micro-benchmarks through the runtime against plain CUDA on one device (needs a GPU):
//   empty:  N tasks that each launch an empty kernel, launch -> completion observed by gpuflow,
//           against N launches on one stream followed by one synchronize;
//   d2h:    one device buffer moved to host by the runtime (GPU producer, CPU consumer), against
//           cudaMemcpy of the same size into pageable memory: memory touched before (a buffer
//           reused), and fresh memory each time (what the runtime's move pays: its host copy is
//           a new allocation, faulted in page by page while the bytes arrive).
//   gpu_overhead [N_EMPTY [MIB]]   prints one JSON line
#include <cuda_runtime.h>
#include <gpuflow.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__global__ void empty_kernel() {}
__global__ void touch(char *p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = 1;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int empty_body(gf_task_ctx *ctx, void *) {
  gf_task_env env = GF_TASK_ENV_INIT;
  gf_task_ctx_env(&env, ctx);
  empty_kernel<<<1, 1, 0, static_cast<cudaStream_t>(env.stream)>>>();
  return cudaPeekAtLastError() == cudaSuccess ? 0 : 1;
}

size_t g_bytes = 0;
int produce_body(gf_task_ctx *ctx, void *) {
  gf_task_env env = GF_TASK_ENV_INIT;
  gf_task_ctx_env(&env, ctx);
  void *out = nullptr;
  if (gf_task_ctx_output(&out, ctx, 0, g_bytes) != GF_OK) return 1;
  touch<<<1024, 256, 0, static_cast<cudaStream_t>(env.stream)>>>(static_cast<char *>(out), g_bytes);
  return 0;
}
double g_consumed_at = 0;
int consume_body(gf_task_ctx *, void *) {
  g_consumed_at = now();
  return 0;
}

#define CHECK(x)                                                    \
  do {                                                              \
    if ((x) != GF_OK) {                                             \
      std::fprintf(stderr, "%s failed: %s\n", #x, gf_last_error()); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

}  // namespace

int main(int argc, char **argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  g_bytes = static_cast<size_t>(argc > 2 ? std::atoi(argv[2]) : 1024) << 20;
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_CUDA;
  config.cpu_workers = 1;
  gf_pool *pool = nullptr;
  if (gf_pool_create(&pool, &config) != GF_OK) {
    std::fprintf(stderr, "gpu_overhead: %s\n", gf_last_error());
    return 2;
  }
  // Empty GPU tasks through the runtime.
  double runtime_empty = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    gf_graph *g = nullptr;
    CHECK(gf_graph_create(&g));
    for (int i = 0; i < n; ++i) {
      gf_task_desc d = GF_TASK_DESC_INIT;
      d.gpu_fn = empty_body;
      gf_task t;
      CHECK(gf_graph_add_task(&t, g, &d));
    }
    double t0 = now();
    gf_run *run = nullptr;
    CHECK(gf_graph_submit(&run, pool, g, nullptr));
    CHECK(gf_run_wait(run, -1));
    runtime_empty = std::min(runtime_empty, now() - t0);
    gf_run_destroy(run);
    gf_graph_destroy(g);
  }
  // The same launches, plain.
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  double plain_empty = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now();
    for (int i = 0; i < n; ++i) empty_kernel<<<1, 1, 0, stream>>>();
    cudaStreamSynchronize(stream);
    plain_empty = std::min(plain_empty, now() - t0);
  }
  // Device -> host through the runtime: producer on the GPU, consumer on the CPU.
  double runtime_d2h = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    gf_graph *g = nullptr;
    CHECK(gf_graph_create(&g));
    gf_buffer_desc b = GF_BUFFER_DESC_INIT;
    b.size = g_bytes;
    gf_data data;
    CHECK(gf_graph_add_buffer(&data, g, &b));
    gf_task_desc p = GF_TASK_DESC_INIT;
    p.gpu_fn = produce_body;
    p.outputs = &data;
    p.output_count = 1;
    gf_task tp;
    CHECK(gf_graph_add_task(&tp, g, &p));
    gf_task_desc c = GF_TASK_DESC_INIT;
    c.cpu_fn = consume_body;
    c.inputs = &data;
    c.input_count = 1;
    gf_task tc;
    CHECK(gf_graph_add_task(&tc, g, &c));
    gf_run *run = nullptr;
    CHECK(gf_graph_submit(&run, pool, g, nullptr));
    CHECK(gf_run_wait(run, -1));
    gf_run_stats stats = GF_RUN_STATS_INIT;
    CHECK(gf_run_stats_get(&stats, run));
    runtime_d2h = std::min(runtime_d2h, stats.elapsed_s);  // includes the fill kernel
    gf_run_destroy(run);
    gf_graph_destroy(g);
  }
  void *device = nullptr;
  cudaMalloc(&device, g_bytes);
  std::vector<char> host(g_bytes);
  double plain_d2h = 1e30, fresh_d2h = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now();
    cudaMemcpy(host.data(), device, g_bytes, cudaMemcpyDeviceToHost);
    plain_d2h = std::min(plain_d2h, now() - t0);
    void *fresh = std::malloc(g_bytes);
    t0 = now();
    cudaMemcpy(fresh, device, g_bytes, cudaMemcpyDeviceToHost);
    fresh_d2h = std::min(fresh_d2h, now() - t0);
    std::free(fresh);
  }
  std::printf(
      "{\"empty_tasks\": %d, \"runtime_us_per_task\": %.2f, \"plain_us_per_launch\": %.2f, "
      "\"d2h_bytes\": %zu, \"runtime_d2h_gb_s\": %.2f, \"cudamemcpy_d2h_gb_s\": %.2f, "
      "\"cudamemcpy_fresh_d2h_gb_s\": %.2f}\n",
      n, runtime_empty / n * 1e6, plain_empty / n * 1e6, g_bytes,
      static_cast<double>(g_bytes) / runtime_d2h / 1e9,
      static_cast<double>(g_bytes) / plain_d2h / 1e9,
      static_cast<double>(g_bytes) / fresh_d2h / 1e9);
  cudaFree(device);
  gf_pool_destroy(pool);
  return 0;
}
