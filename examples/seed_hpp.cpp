// seed_hpp — the workload of Dask's GPU blog post, in C++ with gpuflow.hpp:
//
//     x = da.random.RandomState().normal(10, 1, size=(N, N), chunks=(C, C))
//     (x + 1)[::2, ::2].sum().compute()
//
// One task per (C, C) chunk draws its C*C normals (a splitmix64 stream per chunk, Box-Muller, as
// the Rust crate's seed example does), adds 1, keeps every other row and column (global indices,
// like the slice of the whole array) and sums them into an 8-byte buffer; the partial sums are
// added pairwise, level by level, through real data dependencies down to one. The bodies are
// lambdas: a chunk's captures its geometry and seed, a sum's captures nothing. When every GPU
// worker is emulated (host memory), the same lambdas serve as GPU bodies, so the chunks spread
// over every worker of the pool.
//
// Usage: seed_hpp [N [C]]   (defaults 2000 250). Checks the sum against 11 * ceil(N/2)^2 within 6
// standard deviations (the sum of m^2 unit normals has std m), prints "seed: OK" on success, and
// exits non-zero on a wrong sum or any gpuflow::Error.
#include <gpuflow.hpp>

#include "seed_chunk.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr double kMean = 10.0;  // normal(10, 1)
constexpr double kAdd = 1.0;    // x + 1

// splitmix64: tiny, and every seed gives an independent, reproducible stream.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so safe for log().
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1p-53; }
  // Two standard normals (Box-Muller).
  std::pair<double, double> normals() {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double t = 2.0 * std::numbers::pi * uniform();
    return {r * std::cos(t), r * std::sin(t)};
  }

 private:
  uint64_t state_;
};

// Draws the chunk row by row (every element, as the real workload does), adds 1 and sums the
// elements whose global row and column are both even. Stops early when the run is cancelled.
double chunk_sum(const seed_chunk &c, const gpuflow::TaskContext &ctx) {
  SplitMix rng(c.seed);
  // Normals come in pairs: an odd width draws one more, which the slice never sees.
  std::vector<double> row(static_cast<size_t>(c.cols + 1));
  const int64_t first_col = c.col0 & 1;  // first local column with an even global index
  double total = 0.0;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.cols; j += 2) {
      const auto [a, b] = rng.normals();
      row[static_cast<size_t>(j)] = kMean + a;
      row[static_cast<size_t>(j + 1)] = kMean + b;
    }
    if (((c.row0 + r) & 1) == 0) {
      for (int64_t j = first_col; j < c.cols; j += 2) total += row[static_cast<size_t>(j)] + kAdd;
    }
    if ((r & 63) == 63 && ctx.cancelled()) throw std::runtime_error("cancelled");
  }
  return total;
}

// One partial sum from input `index`: exactly one double, or the task fails naming the input.
double partial(const gpuflow::TaskContext &ctx, uint32_t index) {
  const std::span<const double> in = ctx.input_as<double>(index);
  if (in.size() != 1) {
    throw std::runtime_error("partial sum #" + std::to_string(index) + " has " +
                             std::to_string(in.size()) + " values, expected 1");
  }
  return in[0];
}

int64_t parse(const char *arg, const char *what) {
  int64_t v = 0;
  const char *end = arg + std::strlen(arg);
  const auto [ptr, ec] = std::from_chars(arg, end, v);
  if (ec != std::errc() || ptr != end || v <= 0) {
    std::fprintf(stderr, "seed_hpp: %s must be a positive integer, got '%s'\n", what, arg);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 3) {
    std::fprintf(stderr, "usage: %s [N [C]]\n", argv[0]);
    return 2;
  }
  const int64_t n = argc > 1 ? parse(argv[1], "N") : 2000;
  const int64_t c = argc > 2 ? parse(argv[2], "C") : 250;
  try {
    gpuflow::Pool pool{gpuflow::PoolConfig()};  // default pool: every core, plus emulated devices
    const uint32_t workers = pool.worker_count();
    // Host code cannot run on a real GPU's worker: there the chunks stay on the CPU workers.
    bool emulated = true;
    for (uint32_t w = 0; w < workers; ++w) {
      const gf_worker_info info = pool.worker(w);
      if (info.kind == GF_WORKER_GPU && !info.emulated) emulated = false;
    }

    gpuflow::Graph graph;
    const int64_t blocks = (n + c - 1) / c;
    std::vector<gpuflow::Data> level;
    std::vector<gpuflow::Task> chunk_tasks;
    for (int64_t bi = 0; bi < blocks; ++bi) {
      for (int64_t bj = 0; bj < blocks; ++bj) {
        const std::string name = "chunk-" + std::to_string(bi) + "-" + std::to_string(bj);
        const seed_chunk chunk{bi * c, bj * c, std::min(c, n - bi * c), std::min(c, n - bj * c),
                               static_cast<uint64_t>(bi * blocks + bj)};
        const gpuflow::Data out = graph.add_buffer(gpuflow::Buffer(name).size(sizeof(double)));
        // Captured by value: the graph stores the lambda until its last run is gone.
        const auto body = [chunk](gpuflow::TaskContext &ctx) {
          ctx.output_as<double>(0, 1)[0] = chunk_sum(chunk, ctx);
        };
        gpuflow::TaskBuilder task = graph.task(name);
        task.cpu(body).outputs({out});
        if (emulated) task.gpu(body);
        chunk_tasks.push_back(task.add());
        level.push_back(out);
      }
    }

    // Pairwise tree reduction: each sum task reads two partial sums and writes a new one.
    const auto add = [](gpuflow::TaskContext &ctx) {
      ctx.output_as<double>(0, 1)[0] = partial(ctx, 0) + partial(ctx, 1);
    };
    for (int depth = 1; level.size() > 1; ++depth) {
      std::vector<gpuflow::Data> next;
      for (size_t k = 0; k + 1 < level.size(); k += 2) {
        const std::string name = "sum-" + std::to_string(depth) + "-" + std::to_string(k / 2);
        const gpuflow::Data out = graph.add_buffer(gpuflow::Buffer(name).size(sizeof(double)));
        gpuflow::TaskBuilder task = graph.task(name);
        task.cpu(add).inputs({level[k], level[k + 1]}).outputs({out});
        if (emulated) task.gpu(add);
        task.add();
        next.push_back(out);
      }
      if (level.size() % 2) next.push_back(level.back());  // odd one out moves up a level
      level.swap(next);
    }
    const gpuflow::Data total = level[0];  // consumed by no task, so kept for fetch_one

    gpuflow::Run run = graph.submit(pool);
    run.wait();
    const double sum = run.fetch_one<double>(total);

    const double m = static_cast<double>((n + 1) / 2);  // kept rows (and columns)
    const double expected = (kMean + kAdd) * m * m;
    const double tolerance = 6.0 * m + 1e-12 * expected;  // 6 sigma + float rounding
    const double err = std::fabs(sum - expected);
    std::printf("N %lld  C %lld  tasks %llu  workers %u\n", static_cast<long long>(n),
                static_cast<long long>(c), static_cast<unsigned long long>(run.stats().tasks),
                workers);
    std::printf("sum       %.6f\nexpected  %.1f  (11 * %.0f^2)\n", sum, expected, m);
    std::vector<uint32_t> per_worker(workers, 0);
    for (const gpuflow::Task &t : chunk_tasks) {
      const uint32_t w = run.task_worker(t);
      if (w < workers) per_worker[w]++;
    }
    std::printf("chunks per worker:");
    for (uint32_t w = 0; w < workers; ++w) {
      const char *name = pool.worker(w).name;
      std::printf(" %s=%u", name ? name : "?", per_worker[w]);
    }
    std::printf("\n");
    if (!(err <= tolerance)) {
      std::fprintf(stderr, "seed_hpp: the sum is %.1f sigma from %.1f (tolerance %.3f)\n", err / m,
                   expected, tolerance);
      return 1;
    }
    std::printf("seed: OK\n");
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "seed_hpp: %s\n", e.what());
    return 1;
  }
}
