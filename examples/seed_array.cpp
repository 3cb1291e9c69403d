// seed_array — the workload of Dask's GPU blog post, as a gpuflow task graph:
//
//     x = da.random.RandomState().normal(10, 1, size=(N, N), chunks=(C, C))
//     (x + 1)[::2, ::2].sum().compute()
//
// One task per (C, C) chunk generates the chunk's C*C normals (a counter-seeded xoshiro256++
// stream per chunk and a 256-layer ziggurat), adds 1, keeps every other row and column (global
// indices, like the slice of the whole array) and sums them into an 8-byte double. The partial
// sums are then added pairwise, level by level, through real data dependencies down to one.
// Chunk and sum tasks have both a CPU and a GPU body, so on the host backend (where GPU workers
// emulate devices in host memory) they spread over every worker of the pool.
//
// Generation is fused with add + slice + sum one row at a time: each row of the chunk is
// generated in full into a small buffer (all C*C normals are drawn and stored, as in the real
// workload) and the kept elements are summed while the row is still in cache.
//
// Usage: seed_array [N [C [REPEATS]]]   (defaults 8000 1000; REPEATS > 0 = benchmark mode: one
// small warm-up, then REPEATS timed runs). Checks the sum against 11 * ceil(N/2)^2 within
// 6 standard deviations (the sum of m^2 unit normals has std m), prints a JSON line last, and
// exits non-zero on any error. Uses only the C ABI in gpuflow.h.
#include <gpuflow.h>

#include "seed_chunk.h"

#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// ---- Random numbers ------------------------------------------------------------------------

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256++ (Blackman & Vigna): fast, all 64 output bits usable.
struct Xoshiro256pp {
  uint64_t s[4];
  explicit Xoshiro256pp(uint64_t seed) {
    for (uint64_t &word : s) word = splitmix64(seed);
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    const uint64_t result = rotl(s[0] + s[3], 23) + s[0];
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  // Uniform in the open interval (0, 1): safe for log().
  double open01() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1p-53; }
};

// Ziggurat for the standard normal, 256 layers (Marsaglia & Tsang 2000, in the layout of
// Doornik's ZIGNOR 2005). x[0] is the base strip's effective width V/f(R); x[1] = R; x[256] = 0.
// ratio[i] = x[i+1] / x[i]: |u| below it lies inside the strip's rectangle (accepted at once,
// ~99% of draws).
struct Ziggurat {
  static constexpr int kLayers = 256;
  static constexpr double kR = 3.6541528853610088;
  static constexpr double kV = 4.92867323399e-3;
  double x[kLayers + 1];
  double ratio[kLayers];

  Ziggurat() {
    double f = std::exp(-0.5 * kR * kR);
    x[0] = kV / f;
    x[1] = kR;
    x[kLayers] = 0.0;
    for (int i = 2; i < kLayers; ++i) {
      x[i] = std::sqrt(-2.0 * std::log(kV / x[i - 1] + f));
      f = std::exp(-0.5 * x[i] * x[i]);
    }
    for (int i = 0; i < kLayers; ++i) ratio[i] = x[i + 1] / x[i];
  }

  // The rare path: the base strip's tail, or the wedge of strip i. u is in [-1, 1).
  [[gnu::noinline]] double slow(Xoshiro256pp &rng, unsigned i, double u) const {
    for (;;) {
      if (i == 0) {  // tail beyond R (Marsaglia 1964)
        double a, b;
        do {
          a = std::log(rng.open01()) / kR;
          b = std::log(rng.open01());
        } while (-2.0 * b < a * a);
        return u < 0 ? a - kR : kR - a;
      }
      const double v = u * x[i];
      const double f0 = std::exp(-0.5 * (x[i] * x[i] - v * v));
      const double f1 = std::exp(-0.5 * (x[i + 1] * x[i + 1] - v * v));
      if (f1 + rng.open01() * (f0 - f1) < 1.0) return v;
      // Rejected: draw again (fast path first).
      const uint64_t bits = rng.next();
      i = static_cast<unsigned>(bits >> 3) & (kLayers - 1);
      u = static_cast<double>(static_cast<int64_t>(bits) >> 11) * 0x1p-52;
      if (std::fabs(u) < ratio[i]) return u * x[i];
    }
  }

  // One standard normal from one 64-bit draw (most of the time): bits 3..10 pick the layer,
  // bits 11..63 give a signed uniform u in [-1, 1).
  double operator()(Xoshiro256pp &rng) const {
    const uint64_t bits = rng.next();
    const unsigned i = static_cast<unsigned>(bits >> 3) & (kLayers - 1);
    const double u = static_cast<double>(static_cast<int64_t>(bits) >> 11) * 0x1p-52;
    if (std::fabs(u) < ratio[i]) [[likely]]
      return u * x[i];
    return slow(rng, i, u);
  }
};

const Ziggurat &ziggurat() {
  static const Ziggurat table;
  return table;
}

// ---- The workload --------------------------------------------------------------------------

constexpr double kMean = 10.0;  // normal(10, 1)
constexpr double kAdd = 1.0;    // x + 1

using Chunk = seed_chunk;

// Generates the chunk row by row, adds 1, sums global-even rows and columns. Writes one double.
int chunk_body(gf_task_ctx *ctx, void *user_data) {
  const Chunk &c = *static_cast<const Chunk *>(user_data);
  const Ziggurat &zig = ziggurat();
  Xoshiro256pp rng(c.seed);
  std::vector<double> row(static_cast<size_t>(c.cols));
  const int64_t first_col = c.col0 & 1;  // first local column with an even global index
  double total = 0.0;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (double &v : row) v = kMean + zig(rng);  // x = normal(10, 1): every element drawn
    if (((c.row0 + r) & 1) == 0) {               // [::2, ::2] of x + 1
      double row_sum = 0.0;
      for (int64_t j = first_col; j < c.cols; j += 2) row_sum += row[static_cast<size_t>(j)] + kAdd;
      total += row_sum;
    }
    if ((r & 63) == 63 && gf_task_ctx_cancelled(ctx)) {
      gf_task_ctx_fail(ctx, "cancelled");
      return 1;
    }
  }
  void *out = nullptr;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(double)) != GF_OK) return 1;
  std::memcpy(out, &total, sizeof total);
  return 0;
}

// Adds two 8-byte partial sums.
int sum_body(gf_task_ctx *ctx, void *) {
  double a = 0, b = 0;
  for (uint32_t k = 0; k < 2; ++k) {
    const void *in = nullptr;
    uint64_t size = 0;
    if (gf_task_ctx_input(&in, &size, ctx, k) != GF_OK) return 1;
    if (size != sizeof(double)) {
      gf_task_ctx_fail(ctx, "partial sum is not 8 bytes");
      return 1;
    }
    std::memcpy(k == 0 ? &a : &b, in, sizeof(double));
  }
  void *out = nullptr;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(double)) != GF_OK) return 1;
  const double s = a + b;
  std::memcpy(out, &s, sizeof s);
  return 0;
}

// GPU bodies: on real GPUs the CUDA ones (seed_array_cuda.cu), on emulated devices the host code.
bool g_real_gpus = false;
gf_task_fn chunk_gpu_body() {
#ifdef SEED_ARRAY_CUDA
  if (g_real_gpus) return seed_chunk_gpu;
#endif
  return chunk_body;
}
gf_task_fn sum_gpu_body() {
#ifdef SEED_ARRAY_CUDA
  if (g_real_gpus) return seed_sum_gpu;
#endif
  return sum_body;
}

// ---- Plumbing ------------------------------------------------------------------------------

[[noreturn]] void die(const char *what, gf_status status) {
  std::fprintf(stderr, "seed_array: %s failed: %s: %s\n", what, gf_status_name(status),
               gf_last_error());
  std::exit(1);
}
#define CHECK(call)                                        \
  do {                                                     \
    const gf_status check_status_ = (call);                \
    if (check_status_ != GF_OK) die(#call, check_status_); \
  } while (0)

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Quick check of the generator's first, second and fourth moments (2^20 draws, 6 sigma).
bool generator_ok() {
  const Ziggurat &zig = ziggurat();
  Xoshiro256pp rng(12345);
  const int n = 1 << 20;
  double m1 = 0, m2 = 0, m4 = 0;
  for (int i = 0; i < n; ++i) {
    const double z = zig(rng);
    m1 += z;
    m2 += z * z;
    m4 += z * z * z * z;
  }
  m1 /= n, m2 /= n, m4 /= n;
  const double k = 6.0 / std::sqrt(static_cast<double>(n));
  const bool ok = std::fabs(m1) < k && std::fabs(m2 - 1) < k * std::sqrt(2.0) &&
                  std::fabs(m4 - 3) < k * std::sqrt(96.0);
  if (!ok)
    std::fprintf(stderr, "seed_array: generator moments off: mean %g var %g m4 %g\n", m1, m2, m4);
  return ok;
}

struct Workload {
  int64_t n, c;
};

struct Result {
  double sum = 0, build_s = 0, run_s = 0;
  size_t chunks = 0, tasks = 0;
  std::vector<uint32_t> chunks_per_worker;
};

// Builds the graph for one (N, C), runs it, fetches the sum.
Result run_once(gf_pool *pool, const Workload &w, bool gpu_bodies, uint32_t workers) {
  Result res;
  const auto t0 = std::chrono::steady_clock::now();
  gf_graph *graph = nullptr;
  CHECK(gf_graph_create(&graph));

  std::vector<Chunk> chunks;  // task user data: must outlive the run
  for (int64_t r = 0; r < w.n; r += w.c)
    for (int64_t col = 0; col < w.n; col += w.c)
      chunks.push_back({r, col, std::min(w.c, w.n - r), std::min(w.c, w.n - col),
                        0x5EED000000000000ull ^ static_cast<uint64_t>(chunks.size())});

  gf_buffer_desc partial = GF_BUFFER_DESC_INIT;
  partial.size = sizeof(double);
  std::vector<gf_data> level(chunks.size());
  std::vector<gf_task> chunk_tasks(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    CHECK(gf_graph_add_buffer(&level[i], graph, &partial));
    gf_task_desc desc = GF_TASK_DESC_INIT;
    desc.cpu_fn = chunk_body;
    desc.gpu_fn = gpu_bodies ? chunk_gpu_body() : nullptr;
    desc.user_data = &chunks[i];
    desc.outputs = &level[i];
    desc.output_count = 1;
    CHECK(gf_graph_add_task(&chunk_tasks[i], graph, &desc));
  }
  res.chunks = chunks.size();
  res.tasks = chunks.size();

  // Pairwise tree reduction: each sum task reads two partial sums and writes a new one.
  while (level.size() > 1) {
    std::vector<gf_data> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      gf_data out;
      CHECK(gf_graph_add_buffer(&out, graph, &partial));
      gf_task_desc desc = GF_TASK_DESC_INIT;
      desc.cpu_fn = sum_body;
      desc.gpu_fn = gpu_bodies ? sum_gpu_body() : nullptr;
      desc.inputs = &level[i];
      desc.input_count = 2;
      desc.outputs = &out;
      desc.output_count = 1;
      gf_task task;
      CHECK(gf_graph_add_task(&task, graph, &desc));
      next.push_back(out);
      res.tasks++;
    }
    if (level.size() % 2) next.push_back(level.back());  // odd one out moves up a level
    level.swap(next);
  }
  const gf_data total = level[0];  // consumed by no task, so kept for gf_run_fetch
  res.build_s = seconds_since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  gf_run *run = nullptr;
  CHECK(gf_graph_submit(&run, pool, graph, nullptr));
  CHECK(gf_run_wait(run, -1));
  res.run_s = seconds_since(t1);

  uint64_t size = 0;
  CHECK(gf_run_fetch(&size, run, total, &res.sum, sizeof res.sum));
  if (size != sizeof(double)) {
    std::fprintf(stderr, "seed_array: result has %" PRIu64 " bytes, expected 8\n", size);
    std::exit(1);
  }
  res.chunks_per_worker.assign(workers, 0);
  for (const gf_task &t : chunk_tasks) {
    uint32_t worker = 0;
    CHECK(gf_run_task_worker(&worker, run, t));
    if (worker < workers) res.chunks_per_worker[worker]++;
  }
  gf_run_destroy(run);
  gf_graph_destroy(graph);
  return res;
}

int64_t parse(const char *arg, const char *what) {
  char *end = nullptr;
  const long long v = std::strtoll(arg, &end, 10);
  if (*end != '\0' || v <= 0) {
    std::fprintf(stderr, "seed_array: %s must be a positive integer, got '%s'\n", what, arg);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 4) {
    std::fprintf(stderr, "usage: %s [N [C [REPEATS]]]\n", argv[0]);
    return 2;
  }
  const Workload w{argc > 1 ? parse(argv[1], "N") : 8000, argc > 2 ? parse(argv[2], "C") : 1000};
  const int repeats = argc > 3 ? static_cast<int>(parse(argv[3], "REPEATS")) : 1;
  if (!generator_ok()) return 1;

  gf_pool *pool = nullptr;
  CHECK(gf_pool_create(&pool, nullptr));
  uint32_t workers = 0;
  CHECK(gf_pool_worker_count(&workers, pool));
  std::vector<std::string> names(workers);
  bool gpu_bodies = true;
  uint32_t cpu_workers = 0;
  for (uint32_t i = 0; i < workers; ++i) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    CHECK(gf_pool_worker_info(&info, pool, i));
    names[i] = info.name ? info.name : "?";
    if (info.kind == GF_WORKER_GPU && !info.emulated) g_real_gpus = true;
    if (info.kind == GF_WORKER_CPU) cpu_workers++;
  }
#ifndef SEED_ARRAY_CUDA
  // Without the CUDA bodies, host code cannot run on a real GPU's worker.
  if (g_real_gpus) {
    gpu_bodies = false;
    std::printf("note: real GPUs found but built without CUDA; chunks run on CPU workers only\n");
  }
#endif

  if (argc > 3) run_once(pool, {2 * w.c, w.c}, gpu_bodies, workers);  // benchmark warm-up

  std::vector<double> times;
  Result res;
  for (int rep = 0; rep < repeats; ++rep) {
    res = run_once(pool, w, gpu_bodies, workers);
    times.push_back(res.build_s + res.run_s);
  }

  const double m = static_cast<double>((w.n + 1) / 2);  // kept rows (and columns)
  const double expected = (kMean + kAdd) * m * m;
  const double tolerance = 6.0 * m + 1e-12 * expected;  // 6 sigma + float rounding
  const double err = std::fabs(res.sum - expected);
  const double normals = static_cast<double>(w.n) * static_cast<double>(w.n);
  std::printf("seed_array: x = normal(10, 1, (%" PRId64 ", %" PRId64 ")) in (%" PRId64 ", %" PRId64
              ") chunks: %zu chunks, %zu tasks, %u workers\n",
              w.n, w.n, w.c, w.c, res.chunks, res.tasks, workers);
  std::printf(
      "sum       %.6f\nexpected  %.1f  (11 * %.0f^2)\nrel error %.3g  (tolerance %.3g: 6 sigma)\n",
      res.sum, expected, m, err / expected, tolerance / expected);
  std::printf("time      %.3f s  (build %.4f s + run %.3f s), %.0f M normals/s\n",
              res.build_s + res.run_s, res.build_s, res.run_s, normals / res.run_s / 1e6);
  std::printf("chunks per worker:");
  for (uint32_t i = 0; i < workers; ++i)
    std::printf(" %s=%u", names[i].c_str(), res.chunks_per_worker[i]);
  std::printf("\n");

  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const size_t k = sorted.size();
  const double median = k % 2 ? sorted[k / 2] : (sorted[k / 2 - 1] + sorted[k / 2]) / 2;
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"peer\": \"seed-gpuflow\", \"N\": %" PRId64 ", \"C\": %" PRId64
              ", \"chunks\": %zu, \"repeats\": %d, \"times_s\": [",
              w.n, w.c, res.chunks, repeats);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.3f", i ? ", " : "", times[i]);
  std::printf(
      "], \"median_s\": %.3f, \"min_s\": %.3f, \"max_s\": %.3f, \"gb_generated\": %.3f, "
      "\"gb_per_s\": %.3f, \"maxrss_mb\": %.1f, \"workers\": %u, \"cpu_workers\": %u}\n",
      median, sorted.front(), sorted.back(), normals * 8 / 1e9, normals * 8 / 1e9 / median,
      static_cast<double>(ru.ru_maxrss) / 1024.0, workers, cpu_workers);

  gf_pool_destroy(pool);
  if (!(err <= tolerance)) {
    std::fprintf(stderr, "seed_array: FAILED: sum %.6f is %.1f sigma from %.1f\n", res.sum, err / m,
                 expected);
    return 1;
  }
  return 0;
}
