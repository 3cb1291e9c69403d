// Spilling under real memory pressure: a graph whose live data is about 1.5x the device memory
// the pool may use (gf_pool_config.device_memory_limit), checked end to end. Prints one JSON line.
//
// K producers (GPU bodies) each fill a block of B bytes with a known pattern; K checkers, each
// ordered after every producer (so all K blocks are alive at once: K * B = 1.5 x the limit), sum
// their block's words on the device into 8 bytes; one CPU task adds the K sums. The sum is
// compared with the one computed here, and the pool's spill counters (gf_pool_device_memory) are
// read at the end: blocks that did not fit went to host memory and came back for their checkers.
//
//   gpu_spill [--host] [--limit-mib L] [--blocks K]    (defaults: L = 2048, K = 12, B = L / 8)
//
// --host runs the same graph on one emulated device of L MiB (the host backend; bodies run on
// host memory), so the program is checked where there is no GPU (ctest bench.smoke.gpu_spill).
// Exit codes: 0 the sum is right and data was spilled, 1 otherwise, 2 no pool (no usable GPU).
#include <cuda_runtime.h>
#include <gpuflow.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint64_t MiB = 1ull << 20;
const int32_t kFirstDevice = 0;

__host__ __device__ inline uint32_t word(uint32_t seed, uint64_t i) {
  return seed * 2654435761u + static_cast<uint32_t>(i * 40503u);
}

__global__ void fill_kernel(uint32_t *out, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    out[i] = word(seed, i);
}

__global__ void sum_kernel(const uint32_t *in, uint64_t n, unsigned long long *out) {
  unsigned long long acc = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    acc += in[i];
  __shared__ unsigned long long partial[256];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

struct Block {
  uint32_t seed;
  uint64_t words;
};

gf_task_env env_of(gf_task_ctx *ctx) {
  gf_task_env env = GF_TASK_ENV_INIT;
  gf_task_ctx_env(&env, ctx);
  return env;
}

int produce(gf_task_ctx *ctx, void *user_data) {
  const Block &b = *static_cast<const Block *>(user_data);
  void *out = nullptr;
  if (gf_task_ctx_output(&out, ctx, 0, b.words * 4) != GF_OK) return 1;
  gf_task_env env = env_of(ctx);
  if (env.stream) {  // a real GPU: enqueue; the task completes with the stream
    fill_kernel<<<1024, 256, 0, static_cast<cudaStream_t>(env.stream)>>>(
        static_cast<uint32_t *>(out), b.words, b.seed);
    return cudaPeekAtLastError() == cudaSuccess ? 0 : 1;
  }
  auto *w = static_cast<uint32_t *>(out);  // an emulated device: host memory
  for (uint64_t i = 0; i < b.words; ++i) w[i] = word(b.seed, i);
  return 0;
}

int check(gf_task_ctx *ctx, void *user_data) {
  const Block &b = *static_cast<const Block *>(user_data);
  const void *in = nullptr;
  uint64_t size = 0;
  void *out = nullptr;
  if (gf_task_ctx_input(&in, &size, ctx, 0) != GF_OK || size != b.words * 4) return 1;
  if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
  gf_task_env env = env_of(ctx);
  if (env.stream) {
    auto stream = static_cast<cudaStream_t>(env.stream);
    if (cudaMemsetAsync(out, 0, 8, stream) != cudaSuccess) return 1;
    sum_kernel<<<1024, 256, 0, stream>>>(static_cast<const uint32_t *>(in), b.words,
                                         static_cast<unsigned long long *>(out));
    return cudaPeekAtLastError() == cudaSuccess ? 0 : 1;
  }
  const auto *w = static_cast<const uint32_t *>(in);
  uint64_t acc = 0;
  for (uint64_t i = 0; i < b.words; ++i) acc += w[i];
  std::memcpy(out, &acc, 8);
  return 0;
}

int total(gf_task_ctx *ctx, void *user_data) {
  const uint32_t n = *static_cast<const uint32_t *>(user_data);
  uint64_t acc = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const void *in = nullptr;
    uint64_t size = 0;
    if (gf_task_ctx_input(&in, &size, ctx, k) != GF_OK || size != 8) return 1;
    uint64_t v;
    std::memcpy(&v, in, 8);
    acc += v;
  }
  void *out = nullptr;
  if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
  std::memcpy(out, &acc, 8);
  return 0;
}

// What moved, from the pool's event stream: spills that copied data to host, spills that only
// dropped a device copy (another copy existed; reported with duration 0), copies onto the device.
struct Moves {
  std::atomic<uint64_t> spills_copied{0}, spills_dropped{0}, dropped_bytes{0}, to_device{0},
      to_device_bytes{0};
};

void on_event(const gf_event *e, void *user_data) {
  auto &m = *static_cast<Moves *>(user_data);
  if (e->kind == GF_EVENT_SPILL_FINISHED && e->ok) {
    if (e->duration_s == 0) {
      m.spills_dropped++;
      m.dropped_bytes += e->bytes;
    } else {
      m.spills_copied++;
    }
  } else if (e->kind == GF_EVENT_TRANSFER_FINISHED && e->ok && e->worker != GF_NO_WORKER) {
    m.to_device++;
    m.to_device_bytes += e->bytes;
  }
}

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "gpu_spill: %s failed: %s\n", what, gf_last_error());
  std::exit(1);
}
#define CHECK(x) \
  if ((x) != GF_OK) die(#x)

}  // namespace

int main(int argc, char **argv) {
  bool host = false;
  uint64_t limit_mib = 2048;
  uint32_t blocks = 12;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--host") {
      host = true;
    } else if (a == "--limit-mib" && i + 1 < argc) {
      limit_mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--blocks" && i + 1 < argc) {
      blocks = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: gpu_spill [--host] [--limit-mib L] [--blocks K]\n");
      return 2;
    }
  }
  if (limit_mib < 8 || blocks < 2) {
    std::fprintf(stderr, "gpu_spill: --limit-mib must be >= 8 and --blocks >= 2\n");
    return 2;
  }
  const uint64_t limit = limit_mib * MiB;
  const uint64_t block_bytes = limit / 8;
  const uint64_t words = block_bytes / 4;

  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.cpu_workers = 2;
  config.device_memory_limit = limit;
  if (host) {
    config.backend = GF_BACKEND_HOST;
    config.emulated_devices = 1;
    config.emulated_device_memory = limit;
    config.emulated_bandwidth = -1;  // as fast as memcpy
  } else {
    config.backend = GF_BACKEND_CUDA;
    config.devices = &kFirstDevice;  // one device, whatever the machine has
    config.device_count = 1;
  }
  gf_pool *pool = nullptr;
  if (gf_pool_create(&pool, &config) != GF_OK) {
    std::fprintf(stderr, "gpu_spill: no pool: %s\n", gf_last_error());
    return 2;
  }
  Moves moves;
  CHECK(gf_pool_set_event_callback(pool, on_event, &moves));
  gf_device_memory before = GF_DEVICE_MEMORY_INIT;
  CHECK(gf_pool_device_memory(&before, pool, 0));

  gf_graph *g = nullptr;
  CHECK(gf_graph_create(&g));
  std::vector<Block> spec(blocks);
  std::vector<gf_task> producers(blocks);
  std::vector<gf_data> data(blocks), sums(blocks);
  for (uint32_t k = 0; k < blocks; ++k) {
    spec[k] = {k + 1, words};
    gf_buffer_desc b = GF_BUFFER_DESC_INIT;
    b.size = block_bytes;
    CHECK(gf_graph_add_buffer(&data[k], g, &b));
    gf_task_desc d = GF_TASK_DESC_INIT;
    std::string name = "fill-" + std::to_string(k);
    d.name = name.c_str();
    d.gpu_fn = produce;
    d.user_data = &spec[k];
    d.priority = 10;
    d.outputs = &data[k];
    d.output_count = 1;
    CHECK(gf_graph_add_task(&producers[k], g, &d));
  }
  for (uint32_t k = 0; k < blocks; ++k) {
    gf_buffer_desc b = GF_BUFFER_DESC_INIT;
    b.size = 8;
    CHECK(gf_graph_add_buffer(&sums[k], g, &b));
    gf_task_desc d = GF_TASK_DESC_INIT;
    std::string name = "check-" + std::to_string(k);
    d.name = name.c_str();
    d.gpu_fn = check;
    d.user_data = &spec[k];
    d.inputs = &data[k];
    d.input_count = 1;
    d.outputs = &sums[k];
    d.output_count = 1;
    d.after = producers.data();  // every block alive at once
    d.after_count = blocks;
    gf_task t;
    CHECK(gf_graph_add_task(&t, g, &d));
  }
  gf_buffer_desc rb = GF_BUFFER_DESC_INIT;
  rb.size = 8;
  rb.flags = GF_DATA_KEEP;
  gf_data result;
  CHECK(gf_graph_add_buffer(&result, g, &rb));
  gf_task_desc td = GF_TASK_DESC_INIT;
  td.name = "total";
  td.cpu_fn = total;
  td.user_data = &blocks;
  td.inputs = sums.data();
  td.input_count = blocks;
  td.outputs = &result;
  td.output_count = 1;
  gf_task tt;
  CHECK(gf_graph_add_task(&tt, g, &td));

  // The expected sum, computed here while the graph runs.
  std::atomic<bool> done{false};
  uint64_t peak_live = 0, peak_resident = 0;
  // GPU_SPILL_TRACE=1: the device's memory accounting every 20 ms on stderr.
  const bool trace = std::getenv("GPU_SPILL_TRACE") != nullptr;
  const auto t_start = std::chrono::steady_clock::now();
  std::thread watcher([&] {
    for (unsigned tick = 0; !done.load(); ++tick) {
      gf_device_memory m = GF_DEVICE_MEMORY_INIT;
      if (gf_pool_device_memory(&m, pool, 0) == GF_OK) {
        peak_live = std::max(peak_live, m.resident + m.spilled);
        peak_resident = std::max(peak_resident, m.resident);
        if (trace && tick % 10 == 0) {
          std::fprintf(
              stderr,
              "%7.3f s resident %" PRIu64 " MiB, spilled %" PRIu64 " MiB, spilled_total %" PRIu64
              " MiB, unspilled_total %" PRIu64 " MiB\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(),
              m.resident / MiB, m.spilled / MiB, m.spilled_total / MiB, m.unspilled_total / MiB);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  gf_run *run = nullptr;
  CHECK(gf_graph_submit(&run, pool, g, nullptr));
  uint64_t expected = 0;
  for (uint32_t k = 0; k < blocks; ++k)
    for (uint64_t i = 0; i < words; ++i) expected += word(spec[k].seed, i);
  const gf_status waited = gf_run_wait(run, 600000);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  watcher.join();
  if (waited != GF_OK) die("gf_run_wait");
  uint64_t got = 0, size = 0;
  CHECK(gf_run_fetch(&size, run, result, &got, sizeof got));
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  CHECK(gf_pool_device_memory(&m, pool, 0));
  const uint64_t spilled = m.spilled_total - before.spilled_total;
  const uint64_t unspilled = m.unspilled_total - before.unspilled_total;
  const bool sum_ok = got == expected;
  const bool ok = sum_ok && spilled > 0 && peak_resident <= m.capacity;
  std::printf("{\"bench\": \"gpu_spill\", \"backend\": \"%s\", \"limit_bytes\": %" PRIu64
              ", \"capacity_bytes\": %" PRIu64 ", \"blocks\": %u, \"block_bytes\": %" PRIu64
              ", \"live_bytes\": %" PRIu64 ", \"live_vs_limit\": %.2f, \"peak_live_seen\": %" PRIu64
              ", \"peak_resident_seen\": %" PRIu64 ", \"spilled_total\": %" PRIu64
              ", \"unspilled_total\": %" PRIu64 ", \"spills_copied\": %" PRIu64
              ", \"spills_dropped\": %" PRIu64 ", \"dropped_bytes\": %" PRIu64
              ", \"copies_to_device\": %" PRIu64 ", \"copied_to_device_bytes\": %" PRIu64
              ", \"seconds\": %.3f, \"sum\": %" PRIu64 ", \"expected\": %" PRIu64
              ", \"sum_ok\": %s, \"ok\": %s}\n",
              host ? "host" : "cuda", limit, m.capacity, blocks, block_bytes, blocks * block_bytes,
              static_cast<double>(blocks * block_bytes) / static_cast<double>(limit), peak_live,
              peak_resident, spilled, unspilled, moves.spills_copied.load(),
              moves.spills_dropped.load(), moves.dropped_bytes.load(), moves.to_device.load(),
              moves.to_device_bytes.load(), seconds, got, expected, sum_ok ? "true" : "false",
              ok ? "true" : "false");
  gf_pool_set_event_callback(pool, nullptr, nullptr);
  gf_run_destroy(run);
  gf_graph_destroy(g);
  gf_pool_destroy(pool);
  if (!sum_ok)
    std::fprintf(stderr, "gpu_spill: FAILED: sum %" PRIu64 " != %" PRIu64 "\n", got, expected);
  if (spilled == 0) std::fprintf(stderr, "gpu_spill: FAILED: nothing was spilled\n");
  return ok ? 0 : 1;
}
