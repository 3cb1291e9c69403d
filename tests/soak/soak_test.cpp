// soak_test.cpp: random graphs with random cancellations, fetches and spilling on tiny emulated
// devices, for a bounded time, through the public ABI only (gpuflow.h). Built to run in the
// plain, ASan + UBSan and TSan builds.
//
// Every body writes a pattern derived from (graph, task, output index, checksums of the bytes it
// read), so the test recomputes every buffer independently: each fetched buffer must hold exactly
// what its producer wrote, and each body checks that its inputs hold what their producers wrote.
// After each round (all runs destroyed) every ledger line and every device's memory must be back
// to zero, and the pool must still run a fresh graph correctly.
//
// Environment:
//   GPUFLOW_SOAK_SECONDS  time budget for the whole binary (default 20); each test takes a share
//                         and stops by itself, so slow (sanitizer) builds do fewer iterations.
//   GPUFLOW_SOAK_SEED     base seed (decimal or 0x hex); printed by every test, and on failure.
//
// Failing cases fail fast and say why: runs are waited for with a timeout (60 s, then the states
// of the run's tasks are printed), and a watchdog aborts the process with a message naming the
// test and the seed if a test outlives 120 s plus the budget (a hang inside gf_run_destroy or
// gf_pool_destroy).
//
// The Soak.Adversarial* tests isolate findings from adversarial review so they run
// deterministically every time, rather than when the random soak happens to hit them.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace gft;
using Clock = std::chrono::steady_clock;

constexpr uint64_t KiB = 1ull << 10;
constexpr uint64_t MiB = 1ull << 20;
constexpr int64_t kRunWaitMs = 60000;  // a run that takes longer than this is reported as hung

// ---------------------------------------------------------------------------------------------
// Budget, seeds, watchdog

double soak_seconds() {
  const char *e = std::getenv("GPUFLOW_SOAK_SECONDS");
  if (e != nullptr && *e != '\0') {
    char *end = nullptr;
    const double v = std::strtod(e, &end);
    if (end != e && v > 0.0) return v;
  }
  return 20.0;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  return splitmix64(a ^ splitmix64(b + 0x632BE59BD9B4E019ull));
}

uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char *e = std::getenv("GPUFLOW_SOAK_SEED");
    if (e != nullptr && *e != '\0') return static_cast<uint64_t>(std::strtoull(e, nullptr, 0));
    std::random_device rd;
    const uint64_t hi = rd(), lo = rd();
    return splitmix64((hi << 32) ^ lo ^
                      static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  }();
  return seed;
}

std::string current_test_name() {
  const ::testing::TestInfo *info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("?");
}

uint64_t seed_for(const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return mix(base_seed(), h);
}

std::string seed_note() {
  std::ostringstream o;
  o << "soak seed: replay with GPUFLOW_SOAK_SEED=" << base_seed();
  return o.str();
}

// Aborts the process with a message when a test outlives its limit: the last resort against a
// hang inside a call that takes no timeout (gf_run_destroy, gf_pool_destroy).
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(m_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr,
                         "\n[soak watchdog] %s still running after %lld s: aborting (a call "
                         "without a timeout hangs). %s\n",
                         what_.c_str(), static_cast<long long>(limit.count()), seed_note().c_str());
            std::fflush(stderr);
            std::fflush(stdout);
            std::abort();
          }
        }) {}
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Randomness and byte patterns

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return splitmix64(s_++ * 0xD1B54A32D192ED03ull); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }  // inclusive
  int pick(int lo, int hi) {
    return static_cast<int>(range(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi)));
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t s_;
};

void fill_pattern(unsigned char *dst, uint64_t size, uint64_t seed) {
  const uint64_t words = size / 8;
  for (uint64_t i = 0; i < words; ++i) {
    const uint64_t v = splitmix64(seed + i);
    std::memcpy(dst + 8 * i, &v, 8);
  }
  if (size % 8 != 0) {
    const uint64_t v = splitmix64(seed + words);
    std::memcpy(dst + 8 * words, &v, static_cast<size_t>(size % 8));
  }
}

uint64_t checksum(const unsigned char *p, uint64_t size) {
  uint64_t h = 0xcbf29ce484222325ull ^ size;
  const uint64_t words = size / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t v = 0;
    std::memcpy(&v, p + 8 * i, 8);
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  if (size % 8 != 0) {
    uint64_t v = 0;
    std::memcpy(&v, p + 8 * words, static_cast<size_t>(size % 8));
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  return splitmix64(h);
}

std::vector<unsigned char> pattern(uint64_t size, uint64_t seed) {
  std::vector<unsigned char> v(static_cast<size_t>(size));
  fill_pattern(v.data(), size, seed);
  return v;
}

uint64_t pattern_checksum(uint64_t size, uint64_t seed) {
  const std::vector<unsigned char> v = pattern(size, seed);
  return checksum(v.data(), size);
}

// Describes how `got` differs from pattern(size, seed): the first differing byte.
std::string pattern_mismatch(const unsigned char *got, uint64_t size, uint64_t seed) {
  const std::vector<unsigned char> want = pattern(size, seed);
  uint64_t diffs = 0, first = size;
  for (uint64_t i = 0; i < size; ++i) {
    if (got[i] != want[i]) {
      if (first == size) first = i;
      ++diffs;
    }
  }
  std::ostringstream o;
  if (diffs == 0) {
    o << "bytes match";
  } else {
    o << diffs << " of " << size << " bytes differ, first at offset " << first << " (got 0x"
      << std::hex << static_cast<int>(got[first]) << ", want 0x" << static_cast<int>(want[first])
      << std::dec << ")";
  }
  return o.str();
}

// ---------------------------------------------------------------------------------------------
// Findings: every problem the test sees, by category. The first of each category fails the test
// with its details (from whichever thread saw it: gtest assertions are thread-safe); later ones
// are only counted, so a soak that keeps going after a problem reports each kind of problem once
// and a summary at the end instead of a flood.

class Findings {
 public:
  void add(const std::string &category, const std::string &detail) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(m_);
      auto it = std::find_if(seen_.begin(), seen_.end(),
                             [&](const auto &e) { return e.first == category; });
      if (it == seen_.end()) {
        seen_.emplace_back(category, 1);
        first = true;
      } else {
        ++it->second;
      }
    }
    if (first)
      ADD_FAILURE() << "[" << category << "]\n  " << detail << "\n  (" << seed_note()
                    << "; later occurrences of this problem are only counted)";
  }
  uint64_t total() {
    std::lock_guard<std::mutex> lock(m_);
    uint64_t n = 0;
    for (const auto &e : seen_) n += e.second;
    return n;
  }
  std::string summary() {
    std::lock_guard<std::mutex> lock(m_);
    std::ostringstream o;
    for (const auto &e : seen_) o << "\n  " << e.second << " x [" << e.first << "]";
    return o.str();
  }
  void reset() {
    std::lock_guard<std::mutex> lock(m_);
    seen_.clear();
  }

 private:
  std::mutex m_;
  std::vector<std::pair<std::string, uint64_t>> seen_;
};

Findings &findings() {
  static Findings f;
  return f;
}

void finding(const std::string &category, const std::string &detail) {
  findings().add(category, detail);
}

std::atomic<int64_t> g_live_plans{0};  // task body plans not yet released by the library

// ---------------------------------------------------------------------------------------------
// Task bodies

// Everything one body needs, shared by its CPU and GPU variants; destroyed with the graph's
// user data (counted, so the test sees the library release every graph's user data).
struct BodyPlan {
  std::string label;  // "graph label/task name", for messages
  uint64_t salt = 0;
  std::vector<uint64_t> in_sizes;
  std::vector<uint64_t> in_checksums;
  std::vector<uint64_t> out_sizes;
  std::vector<bool> out_declared_zero;  // size passed to gf_task_ctx_output (declared size 0)
  bool always_fail = false;
  bool fail_first = false;  // fail attempt 1 (retries are planned)
  bool scribble = false;    // ... after writing garbage into its outputs
  uint32_t sleep_us = 0;

  BodyPlan() { g_live_plans.fetch_add(1); }
  BodyPlan(const BodyPlan &) = delete;
  BodyPlan &operator=(const BodyPlan &) = delete;
  ~BodyPlan() { g_live_plans.fetch_sub(1); }
};

const char *kind_name(gf_worker_kind k) {
  return k == GF_WORKER_CPU ? "cpu" : k == GF_WORKER_GPU ? "gpu" : "?";
}

int soak_body(gf_task_ctx *ctx, const BodyPlan &p, gf_worker_kind body_kind) {
  gf_task_env env = GF_TASK_ENV_INIT;
  if (gf_task_ctx_env(&env, ctx) != GF_OK) {
    finding("body: gf_task_ctx_env failed", p.label + ": " + last_error());
    return 1;
  }
  if (env.kind != body_kind)
    finding(std::string("body: a ") + kind_name(body_kind) + " body ran on a " +
                kind_name(env.kind) + " worker",
            p.label);
  if (p.always_fail) {
    gf_task_ctx_fail(ctx, "planned permanent failure");
    return 1;
  }
  if (p.fail_first && env.attempt == 1) {
    if (p.scribble) {
      for (uint32_t j = 0; j < p.out_sizes.size(); ++j) {
        void *o = nullptr;
        const uint64_t size = p.out_declared_zero[j] ? p.out_sizes[j] : 0;
        if (gf_task_ctx_output(&o, ctx, j, size) == GF_OK && o != nullptr)
          std::memset(o, 0xA5, static_cast<size_t>(p.out_sizes[j]));
      }
    }
    gf_task_ctx_fail(ctx, "planned first-attempt failure");
    return 1;
  }
  if (p.sleep_us != 0) {
    const auto until = Clock::now() + std::chrono::microseconds(p.sleep_us);
    while (Clock::now() < until && gf_task_ctx_cancelled(ctx) == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  uint64_t h = p.salt;
  for (uint32_t i = 0; i < p.in_sizes.size(); ++i) {
    const void *ptr = nullptr;
    uint64_t n = 0;
    if (gf_task_ctx_input(&ptr, &n, ctx, i) != GF_OK || ptr == nullptr) {
      finding("body: gf_task_ctx_input failed",
              p.label + ": input " + std::to_string(i) + ": " + last_error());
      return 1;
    }
    if (n != p.in_sizes[i]) {
      finding("body: an input has another size than its producer wrote",
              p.label + ": input " + std::to_string(i) + " has " + std::to_string(n) +
                  " bytes, its producer wrote " + std::to_string(p.in_sizes[i]));
      return 1;
    }
    const uint64_t cs = checksum(static_cast<const unsigned char *>(ptr), n);
    if (cs != p.in_checksums[i])
      finding("body: an input does not hold what its producer wrote",
              p.label + ": input " + std::to_string(i) + " (" + std::to_string(n) +
                  " bytes), body on " + kind_name(env.kind) + " worker " +
                  std::to_string(env.worker) + ", attempt " + std::to_string(env.attempt));
    h = mix(h, cs);
  }
  for (uint32_t j = 0; j < p.out_sizes.size(); ++j) {
    void *o = nullptr;
    const uint64_t size = p.out_declared_zero[j] ? p.out_sizes[j] : 0;
    if (gf_task_ctx_output(&o, ctx, j, size) != GF_OK || o == nullptr) {
      finding("body: gf_task_ctx_output failed for a declared output",
              p.label + ": output " + std::to_string(j) + ": " + last_error());
      return 1;
    }
    fill_pattern(static_cast<unsigned char *>(o), p.out_sizes[j], mix(h, j + 1));
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Random graphs

enum class Kind { Cpu, Gpu, Both };

struct DataPlan {
  std::string name;
  uint64_t size = 0;
  bool host = false;  // a host input (gf_graph_add_host_buffer)
  int producer = -1;
  bool keep = false;
  bool declared_zero = false;
  int consumers = 0;
  uint64_t seed = 0;
  uint64_t checksum = 0;
  gf_data ref{0};
  bool fetchable() const { return host || keep || consumers == 0; }
};

struct TaskPlan {
  std::string name;
  Kind kind = Kind::Cpu;
  std::vector<int> inputs, outputs, after;
  std::vector<gf_resource> resources;  // names are literals
  int32_t priority = 0;
  uint32_t retries = 0;
  bool fail_first = false, scribble = false, always_fail = false;
  uint32_t sleep_us = 0;
  uint64_t salt = 0;
  bool doomed = false;  // fails, or depends on a task that fails
  gf_task ref{0};
};

struct GraphPlan {
  std::string label;
  Graph graph;
  std::vector<TaskPlan> tasks;
  std::vector<DataPlan> data;
  std::vector<int> fetchable;
  int permafail = -1;
  bool has_doomed = false;
  bool ok = false;  // built without errors
};

struct GenLimits {
  uint64_t device_capacity = 16 * MiB;
  int min_tasks = 10;
  int max_tasks = 200;
  bool failures = true;  // first-attempt failures and, sometimes, a task that always fails
  bool sleeps = true;
};

uint64_t pick_size(Rng &rng, uint64_t large) {
  const uint64_t r = rng.below(100);
  if (r < 65) return rng.range(1, 4096);
  if (r < 90) return rng.range(4 * KiB, std::max<uint64_t>(4 * KiB, std::min(256 * KiB, large)));
  return rng.range(large / 4, large);
}

GraphPlan build_graph(Rng &rng, const GenLimits &lim, std::string label) {
  GraphPlan gp;
  gp.label = std::move(label);
  const uint64_t cap = lim.device_capacity;
  const uint64_t large = cap / 12;  // a GPU task's inputs + outputs + gpu_memory stay <= cap / 2
  const int n = rng.chance(0.25) ? rng.pick(lim.min_tasks, lim.max_tasks)
                                 : rng.pick(lim.min_tasks, std::min(lim.max_tasks, 60));
  const int hosts = rng.pick(0, 3);
  for (int i = 0; i < hosts; ++i) {
    DataPlan d;
    d.name = "h" + std::to_string(i);
    d.host = true;
    d.size = pick_size(rng, large);
    d.seed = rng.next();
    d.checksum = pattern_checksum(d.size, d.seed);
    gp.data.push_back(d);
  }
  for (int t = 0; t < n; ++t) {
    TaskPlan tp;
    char name[16];
    std::snprintf(name, sizeof name, "t%03d", t);
    tp.name = name;
    tp.salt = rng.next();
    const uint64_t k = rng.below(100);
    tp.kind = k < 40 ? Kind::Cpu : k < 75 ? Kind::Gpu : Kind::Both;
    // Inputs: mostly recent data (deep chains), sometimes anything older.
    const int n_in =
        gp.data.empty() ? 0 : rng.pick(0, std::min<int>(3, static_cast<int>(gp.data.size())));
    for (int i = 0; i < n_in; ++i) {
      const int size = static_cast<int>(gp.data.size());
      for (int attempt = 0; attempt < 4; ++attempt) {
        const int c =
            rng.chance(0.7)
                ? size - 1 - static_cast<int>(rng.below(static_cast<uint64_t>(std::min(size, 24))))
                : static_cast<int>(rng.below(static_cast<uint64_t>(size)));
        if (std::find(tp.inputs.begin(), tp.inputs.end(), c) == tp.inputs.end()) {
          tp.inputs.push_back(c);
          break;
        }
      }
    }
    const uint64_t o = rng.below(100);
    const int n_out = o < 10 ? 0 : o < 80 ? 1 : 2;
    std::vector<uint64_t> out_sizes;
    for (int j = 0; j < n_out; ++j) out_sizes.push_back(pick_size(rng, large));
    uint64_t gpu_memory = 0;
    const uint64_t r = rng.below(100);
    if (tp.kind == Kind::Gpu) {
      if (r < 25) {
      } else if (r < 45) {
        tp.resources = {{"GPU", 1.0}};
      } else if (r < 75) {
        tp.resources = {{"GPU", 0.5}};
      } else if (r < 90) {
        gpu_memory = rng.range(64 * KiB, large);
        tp.resources = {{"gpu_memory", static_cast<double>(gpu_memory)}};
      } else {
        gpu_memory = rng.range(64 * KiB, large);
        tp.resources = {{"GPU", 0.5}, {"gpu_memory", static_cast<double>(gpu_memory)}};
      }
    } else if (tp.kind == Kind::Both) {
      if (r < 15) tp.resources = {{"cpu", 1.0}};
      if (r >= 85) tp.resources = {{"GPU", 0.5}};
    } else if (r < 30) {
      tp.resources = {{"cpu", 1.0}};
    }
    const bool may_run_on_gpu = tp.kind == Kind::Gpu || (tp.kind == Kind::Both && !(r < 15));
    if (may_run_on_gpu) {
      uint64_t footprint = gpu_memory;
      for (int i : tp.inputs) footprint += gp.data[static_cast<size_t>(i)].size;
      for (uint64_t s : out_sizes) footprint += s;
      if (footprint > cap / 2) {  // would not fit comfortably: make it a CPU task
        tp.kind = Kind::Cpu;
        tp.resources.clear();
      }
    }
    if (lim.failures && rng.chance(0.1)) {
      tp.fail_first = true;
      tp.scribble = rng.chance(0.5);
      tp.retries = static_cast<uint32_t>(rng.range(1, 2));
    } else if (rng.chance(0.2)) {
      tp.retries = 1;  // never needed
    }
    if (rng.chance(0.3)) tp.priority = static_cast<int32_t>(rng.range(0, 6)) - 3;
    if (lim.sleeps && rng.chance(0.08)) tp.sleep_us = static_cast<uint32_t>(rng.range(200, 3000));
    if (t > 0 && rng.chance(0.15))
      tp.after.push_back(static_cast<int>(rng.below(static_cast<uint64_t>(t))));
    for (int i : tp.inputs) gp.data[static_cast<size_t>(i)].consumers++;
    for (int j = 0; j < n_out; ++j) {
      DataPlan d;
      d.name = tp.name + ".o" + std::to_string(j);
      d.size = out_sizes[static_cast<size_t>(j)];
      d.producer = t;
      d.keep = rng.chance(0.25);
      d.declared_zero = tp.kind == Kind::Cpu && rng.chance(0.15);
      tp.outputs.push_back(static_cast<int>(gp.data.size()));
      gp.data.push_back(d);
    }
    gp.tasks.push_back(tp);
  }
  if (lim.failures && rng.chance(0.06)) {
    gp.permafail = static_cast<int>(rng.below(static_cast<uint64_t>(n)));
    TaskPlan &f = gp.tasks[static_cast<size_t>(gp.permafail)];
    f.always_fail = true;
    f.fail_first = false;
    f.retries = static_cast<uint32_t>(rng.range(0, 1));
  }
  // Expected contents and outcomes, in task order (inputs are always produced earlier).
  for (TaskPlan &tp : gp.tasks) {
    tp.doomed = tp.always_fail;
    uint64_t h = tp.salt;
    for (int i : tp.inputs) {
      const DataPlan &d = gp.data[static_cast<size_t>(i)];
      if (d.producer >= 0 && gp.tasks[static_cast<size_t>(d.producer)].doomed) tp.doomed = true;
      h = mix(h, d.checksum);
    }
    for (int a : tp.after)
      if (gp.tasks[static_cast<size_t>(a)].doomed) tp.doomed = true;
    for (size_t j = 0; j < tp.outputs.size(); ++j) {
      DataPlan &d = gp.data[static_cast<size_t>(tp.outputs[j])];
      d.seed = mix(h, j + 1);
      d.checksum = pattern_checksum(d.size, d.seed);
    }
    gp.has_doomed = gp.has_doomed || tp.doomed;
  }
  for (size_t i = 0; i < gp.data.size(); ++i)
    if (gp.data[i].fetchable()) gp.fetchable.push_back(static_cast<int>(i));

  // The graph itself.
  gp.graph = make_graph();
  if (!gp.graph) return gp;
  gf_graph *g = gp.graph.get();
  for (DataPlan &d : gp.data) {
    if (!d.host) continue;
    const std::vector<unsigned char> bytes = pattern(d.size, d.seed);
    const gf_status s =
        gf_graph_add_host_buffer(&d.ref, g, d.name.c_str(), bytes.data(), d.size, 0);
    EXPECT_EQ(s, GF_OK) << gp.label << ": gf_graph_add_host_buffer -> " << describe(s);
    if (s != GF_OK) return gp;
  }
  for (TaskPlan &tp : gp.tasks) {
    auto plan = std::make_shared<BodyPlan>();
    plan->label = gp.label + "/" + tp.name;
    plan->salt = tp.salt;
    plan->always_fail = tp.always_fail;
    plan->fail_first = tp.fail_first;
    plan->scribble = tp.scribble;
    plan->sleep_us = tp.sleep_us;
    TaskSpec spec;
    spec.name = tp.name;
    for (int i : tp.inputs) {
      const DataPlan &d = gp.data[static_cast<size_t>(i)];
      plan->in_sizes.push_back(d.size);
      plan->in_checksums.push_back(d.checksum);
      spec.inputs.push_back(d.ref);
    }
    for (int i : tp.outputs) {
      DataPlan &d = gp.data[static_cast<size_t>(i)];
      d.ref = must_add_buffer(g, d.name.c_str(), d.declared_zero ? 0 : d.size,
                              d.keep ? static_cast<uint32_t>(GF_DATA_KEEP) : 0u);
      if (d.ref.id == 0) return gp;
      plan->out_sizes.push_back(d.size);
      plan->out_declared_zero.push_back(d.declared_zero);
      spec.outputs.push_back(d.ref);
    }
    for (int a : tp.after) spec.after.push_back(gp.tasks[static_cast<size_t>(a)].ref);
    if (tp.kind != Kind::Gpu)
      spec.cpu = [plan](gf_task_ctx *ctx) { return soak_body(ctx, *plan, GF_WORKER_CPU); };
    if (tp.kind != Kind::Cpu)
      spec.gpu = [plan](gf_task_ctx *ctx) { return soak_body(ctx, *plan, GF_WORKER_GPU); };
    spec.resources = tp.resources;
    spec.priority = tp.priority;
    spec.retries = tp.retries;
    tp.ref = must_add_task(g, spec);
    if (tp.ref.id == 0) return gp;
  }
  gp.ok = true;
  return gp;
}

// ---------------------------------------------------------------------------------------------
// Checking runs

const char *task_state_name(gf_task_state s) {
  switch (s) {
    case GF_TASK_WAITING:
      return "WAITING";
    case GF_TASK_QUEUED:
      return "QUEUED";
    case GF_TASK_RUNNING:
      return "RUNNING";
    case GF_TASK_SUCCEEDED:
      return "SUCCEEDED";
    case GF_TASK_FAILED:
      return "FAILED";
    case GF_TASK_CANCELLED:
      return "CANCELLED";
    default:
      return "?";
  }
}

bool terminal(gf_task_state s) {
  return s == GF_TASK_SUCCEEDED || s == GF_TASK_FAILED || s == GF_TASK_CANCELLED;
}

// The states of a run's tasks, for a run that did not finish or finished wrongly.
std::string dump_tasks(gf_run *run, const std::vector<std::pair<std::string, gf_task>> &tasks) {
  std::ostringstream o;
  int counts[8] = {};
  int listed = 0;
  for (const auto &[name, ref] : tasks) {
    gf_task_state st = GF_TASK_STATE_FORCE32;
    if (gf_run_task_state(&st, run, ref) != GF_OK) {
      o << "\n    " << name << ": gf_run_task_state -> " << last_error();
      continue;
    }
    const int i = static_cast<int>(st);
    if (i >= 1 && i <= 6) counts[i]++;
    if (st != GF_TASK_SUCCEEDED && listed < 25) {
      ++listed;
      uint32_t attempts = 0, worker = 0;
      const char *err = nullptr;
      gf_run_task_attempts(&attempts, run, ref);
      const bool placed = gf_run_task_worker(&worker, run, ref) == GF_OK;
      gf_run_task_error(&err, run, ref);
      o << "\n    " << name << ": " << task_state_name(st) << ", attempts " << attempts;
      if (placed) o << ", worker " << worker;
      if (err != nullptr && *err != '\0') o << ", error: " << err;
    }
  }
  gf_run_stats st = GF_RUN_STATS_INIT;
  gf_run_stats_get(&st, run);
  std::ostringstream head;
  head << "task states: waiting " << counts[1] << ", queued " << counts[2] << ", running "
       << counts[3] << ", succeeded " << counts[4] << ", failed " << counts[5] << ", cancelled "
       << counts[6] << "; stats: attempts " << st.attempts << ", transfers " << st.transfers
       << ", elapsed " << st.elapsed_s << " s" << o.str();
  return head.str();
}

std::string dump_run(gf_run *run, const GraphPlan &gp) {
  std::vector<std::pair<std::string, gf_task>> tasks;
  for (const TaskPlan &t : gp.tasks) tasks.emplace_back(t.name, t.ref);
  return dump_tasks(run, tasks);
}

std::string dump_devices(const gf_pool *pool) {
  std::ostringstream o;
  uint32_t n = 0;
  gf_pool_device_count(&n, pool);
  for (uint32_t d = 0; d < n; ++d) {
    gf_device_memory m = GF_DEVICE_MEMORY_INIT;
    gf_pool_device_memory(&m, pool, d);
    o << "\n    device " << d << ": capacity " << m.capacity << ", resident " << m.resident
      << ", reserved " << m.reserved << ", spilled " << m.spilled << ", spilled_total "
      << m.spilled_total << ", unspilled_total " << m.unspilled_total;
  }
  return o.str();
}

enum class Fetched { Ok, NotAvailable, Bad };

// Fetches `d` and checks every byte. GF_ERR_STATE is NotAvailable (the caller decides whether
// that is acceptable; *why gets the message); anything else but GF_OK is a finding.
Fetched fetch_and_check(gf_run *run, const GraphPlan &gp, const DataPlan &d, Rng &rng,
                        std::string *why = nullptr, bool running = false) {
  constexpr uint64_t kCanary = 16;
  const bool roomy = rng.chance(0.5);  // a larger destination: the extra bytes must stay intact
  std::vector<unsigned char> buf(static_cast<size_t>(d.size + kCanary), 0xCD);
  uint64_t got = ~0ull;
  const gf_status s = gf_run_fetch(&got, run, d.ref, buf.data(), roomy ? d.size + kCanary : d.size);
  if (s == GF_ERR_STATE) {
    if (why != nullptr) *why = last_error();
    return Fetched::NotAvailable;
  }
  const std::string what = gp.label + ": gf_run_fetch(" + d.name + ", " + std::to_string(d.size) +
                           " bytes" + (d.host ? ", a host input" : "") + ")" +
                           (running ? " while the run was running" : " after the run finished");
  if (s != GF_OK) {
    finding(std::string("gf_run_fetch -> ") + gf_status_name(s), what + " -> " + describe(s));
    return Fetched::Bad;
  }
  if (got != d.size) {
    finding("gf_run_fetch reports another size than the producer wrote",
            what + " reports " + std::to_string(got) + " bytes");
    return Fetched::Bad;
  }
  if (checksum(buf.data(), d.size) != d.checksum) {
    finding("gf_run_fetch returned bytes that differ from what the producer wrote",
            what + ": " + pattern_mismatch(buf.data(), d.size, d.seed));
    return Fetched::Bad;
  }
  for (uint64_t i = d.size; i < d.size + kCanary; ++i) {
    if (buf[static_cast<size_t>(i)] != 0xCD) {
      finding("gf_run_fetch wrote past the end of the buffer", what);
      return Fetched::Bad;
    }
  }
  return Fetched::Ok;
}

struct CallbackLog {
  std::atomic<int> calls{0};
  std::atomic<int> state{0};
};

extern "C" void record_completion(gf_run *, gf_run_state state, void *user) {
  auto *log = static_cast<CallbackLog *>(user);
  log->state.store(static_cast<int>(state));
  log->calls.fetch_add(1);
}

// Checks a finished run against its plan: the wait status, every task's state and attempts,
// the counters, the callback, and every fetchable buffer's bytes.
void check_finished(gf_run *run, const GraphPlan &gp, gf_status status, const std::string &msg,
                    bool cancel_requested, const CallbackLog *log, Rng &rng) {
  std::ostringstream ctx_text;
  ctx_text << gp.label << " (gf_run_wait -> " << gf_status_name(status) << ": " << msg
           << "; cancel requested: " << (cancel_requested ? "yes" : "no")
           << "; a task fails by design: " << (gp.has_doomed ? "yes" : "no") << ")";
  const std::string context = ctx_text.str();
  bool status_ok = false;
  if (status == GF_OK) status_ok = !gp.has_doomed;
  if (status == GF_ERR_TASK_FAILED) status_ok = gp.has_doomed;
  if (status == GF_ERR_CANCELLED) status_ok = cancel_requested;
  if (!status_ok)
    finding(std::string("gf_run_wait -> ") + gf_status_name(status) +
                (cancel_requested ? " after gf_run_cancel" : " without gf_run_cancel") +
                (gp.has_doomed ? ", a task fails by design" : ", no task fails by design"),
            context + "\n  " + dump_run(run, gp));
  if (!cancel_requested && status == GF_ERR_TASK_FAILED && gp.permafail >= 0) {
    const std::string &culprit = gp.tasks[static_cast<size_t>(gp.permafail)].name;
    if (msg.find(culprit) == std::string::npos)
      finding("gf_run_wait's message does not name the failed task",
              context + ": should name " + culprit);
  }
  gf_run_state rs = GF_RUN_STATE_FORCE32;
  GF_EXPECT_OK(gf_run_state_get(&rs, run));
  const gf_run_state want_rs = status == GF_OK                ? GF_RUN_SUCCEEDED
                               : status == GF_ERR_TASK_FAILED ? GF_RUN_FAILED
                                                              : GF_RUN_CANCELLED;
  if (rs != want_rs)
    finding("gf_run_state_get disagrees with gf_run_wait",
            context + ": state " + std::to_string(static_cast<int>(rs)));
  if (log != nullptr) {
    if (log->calls.load() != 1)
      finding("the completion callback did not run exactly once before gf_run_wait returned",
              context + ": " + std::to_string(log->calls.load()) + " calls");
    else if (log->state.load() != static_cast<int>(rs))
      finding("the completion callback was given another state than gf_run_state_get reports",
              context + ": callback " + std::to_string(log->state.load()) + ", run " +
                  std::to_string(static_cast<int>(rs)));
  }

  std::vector<gf_task_state> states(gp.tasks.size(), GF_TASK_STATE_FORCE32);
  uint64_t succeeded = 0, failed = 0, cancelled = 0;
  for (size_t i = 0; i < gp.tasks.size(); ++i) {
    const TaskPlan &t = gp.tasks[i];
    gf_task_state st = GF_TASK_STATE_FORCE32;
    GF_EXPECT_OK(gf_run_task_state(&st, run, t.ref));
    states[i] = st;
    succeeded += st == GF_TASK_SUCCEEDED;
    failed += st == GF_TASK_FAILED;
    cancelled += st == GF_TASK_CANCELLED;
    uint32_t attempts = 0;
    GF_EXPECT_OK(gf_run_task_attempts(&attempts, run, t.ref));
    const char *err_ptr = nullptr;
    GF_EXPECT_OK(gf_run_task_error(&err_ptr, run, t.ref));
    const std::string err = err_ptr != nullptr ? err_ptr : "<null>";
    std::string problem;  // the category: no names or numbers in it
    if (!terminal(st)) {
      problem = "not finished in a finished run";
    } else if (!cancel_requested && st != (t.doomed ? GF_TASK_FAILED : GF_TASK_SUCCEEDED)) {
      problem = std::string("expected ") + (t.doomed ? "FAILED" : "SUCCEEDED") + " (no cancel)";
    } else if (cancel_requested && !t.doomed && st == GF_TASK_FAILED) {
      problem = "FAILED after gf_run_cancel although nothing it depends on fails by design";
      if (t.fail_first && attempts == 1 && err.find("planned first-attempt failure") == 0)
        problem += " (its first attempt failed as planned and it had a retry left)";
    } else if (st == GF_TASK_SUCCEEDED && attempts != (t.fail_first ? 2u : 1u)) {
      problem = t.fail_first ? "succeeded with attempts != 2 after a planned first-attempt failure"
                             : "succeeded with attempts != 1";
    } else if (!cancel_requested && t.always_fail && attempts != t.retries + 1) {
      problem = "a failing task did not use exactly its retries";
    } else if (!cancel_requested && t.always_fail &&
               err.find("planned permanent failure") == std::string::npos) {
      problem = "a failing task's error text lost the body's message";
    }
    if (!problem.empty())
      finding("task " + std::string(task_state_name(st)) + ": " + problem,
              context + "\n  " + t.name + ": " + task_state_name(st) + ", attempts " +
                  std::to_string(attempts) + ", planned first-attempt failure: " +
                  (t.fail_first ? "yes" : "no") + ", retries " + std::to_string(t.retries) +
                  ", error: " + err + "\n  " + dump_run(run, gp));
  }

  gf_run_stats st = GF_RUN_STATS_INIT;
  GF_EXPECT_OK(gf_run_stats_get(&st, run));
  if (st.tasks != gp.tasks.size() || st.succeeded != succeeded || st.failed != failed ||
      st.cancelled != cancelled || st.attempts < succeeded) {
    std::ostringstream o;
    o << context << ": stats tasks " << st.tasks << ", succeeded " << st.succeeded << ", failed "
      << st.failed << ", cancelled " << st.cancelled << ", attempts " << st.attempts
      << "; task states: " << gp.tasks.size() << " tasks, succeeded " << succeeded << ", failed "
      << failed << ", cancelled " << cancelled;
    finding("gf_run_stats_get disagrees with the task states", o.str());
  }

  for (int i : gp.fetchable) {
    const DataPlan &d = gp.data[static_cast<size_t>(i)];
    const bool produced = d.host || states[static_cast<size_t>(d.producer)] == GF_TASK_SUCCEEDED;
    std::string why;
    const Fetched f = fetch_and_check(run, gp, d, rng, &why);
    if (produced && f == Fetched::NotAvailable)
      finding("gf_run_fetch -> GF_ERR_STATE for kept data whose producer succeeded",
              context + ": " + d.name + ": " + why);
    if (!produced && f == Fetched::Ok)
      finding("gf_run_fetch returned data whose producer did not succeed", context + ": " + d.name);
  }
}

// ---------------------------------------------------------------------------------------------
// Pool-wide invariants

uint32_t device_count(const gf_pool *pool) {
  uint32_t n = 0;
  GF_EXPECT_OK(gf_pool_device_count(&n, pool));
  return n;
}

bool devices_empty(const gf_pool *pool) {
  const uint32_t n = device_count(pool);
  for (uint32_t d = 0; d < n; ++d) {
    gf_device_memory m = GF_DEVICE_MEMORY_INIT;
    if (gf_pool_device_memory(&m, pool, d) != GF_OK) return false;
    if (m.resident != 0 || m.reserved != 0 || m.spilled != 0) return false;
  }
  return true;
}

// Ledger lines with in_use != 0 or peak_in_use > capacity; "" when there are none.
std::string ledger_problems(const gf_pool *pool) {
  std::ostringstream o;
  uint32_t workers = 0;
  GF_EXPECT_OK(gf_pool_worker_count(&workers, pool));
  for (uint32_t w = 0; w < workers; ++w) {
    uint32_t size = 0;
    GF_EXPECT_OK(gf_pool_ledger_size(&size, pool, w));
    for (uint32_t i = 0; i < size; ++i) {
      gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
      GF_EXPECT_OK(gf_pool_ledger_entry(&e, pool, w, i));
      if (e.in_use != 0.0 || e.peak_in_use > e.capacity)
        o << "\n    worker " << w << " " << (e.resource ? e.resource : "<null>") << ": in_use "
          << e.in_use << ", peak " << e.peak_in_use << ", capacity " << e.capacity;
    }
  }
  return o.str();
}

// Every run destroyed: ledgers at zero, device memory at zero, every graph's user data released.
// Returns false (after reporting) when the pool is not idle.
bool expect_pool_idle(const gf_pool *pool, const std::string &when) {
  bool idle = true;
  wait_until([&] { return ledger_problems(pool).empty(); }, 10000ms);
  const std::string ledger = ledger_problems(pool);
  if (!ledger.empty()) {
    finding("ledger not back to zero once every run was destroyed", when + ":" + ledger);
    idle = false;
  }
  if (!wait_until([&] { return devices_empty(pool); }, 10000ms)) {
    finding("device memory not back to zero once every run was destroyed",
            when + ":" + dump_devices(pool));
    idle = false;
  }
  if (!wait_until([] { return g_live_plans.load() == 0; }, 10000ms)) {
    finding("task user data never released once every graph and run was destroyed",
            when + ": " + std::to_string(g_live_plans.load()) + " still alive");
    idle = false;
  }
  return idle;
}

// Samples every ledger line and device while work runs: 0 <= in_use <= capacity at all times.
class InvariantSampler {
 public:
  explicit InvariantSampler(const gf_pool *pool)
      : pool_(pool), thread_([this] {
          while (!done_.load()) {
            sample();
            std::this_thread::sleep_for(2ms);
          }
        }) {}
  InvariantSampler(const InvariantSampler &) = delete;
  InvariantSampler &operator=(const InvariantSampler &) = delete;
  ~InvariantSampler() {
    done_.store(true);
    thread_.join();
  }

 private:
  void sample() {
    uint32_t workers = 0;
    if (gf_pool_worker_count(&workers, pool_) != GF_OK) return;
    for (uint32_t w = 0; w < workers; ++w) {
      uint32_t size = 0;
      if (gf_pool_ledger_size(&size, pool_, w) != GF_OK) continue;
      for (uint32_t i = 0; i < size; ++i) {
        gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
        if (gf_pool_ledger_entry(&e, pool_, w, i) != GF_OK) continue;
        if (e.in_use < 0.0 || e.in_use > e.capacity || e.peak_in_use > e.capacity)
          report("worker " + std::to_string(w) + " resource " + (e.resource ? e.resource : "?") +
                 ": in_use " + std::to_string(e.in_use) + ", peak " +
                 std::to_string(e.peak_in_use) + ", capacity " + std::to_string(e.capacity));
      }
    }
    uint32_t devices = 0;
    if (gf_pool_device_count(&devices, pool_) != GF_OK) return;
    for (uint32_t d = 0; d < devices; ++d) {
      gf_device_memory m = GF_DEVICE_MEMORY_INIT;
      if (gf_pool_device_memory(&m, pool_, d) != GF_OK) continue;
      if (m.resident + m.reserved > m.capacity)
        report("device " + std::to_string(d) + ": resident " + std::to_string(m.resident) +
               " + reserved " + std::to_string(m.reserved) + " > capacity " +
               std::to_string(m.capacity));
    }
  }
  void report(const std::string &what) {
    finding("sampler: a ledger line or a device over-committed while work ran", what);
  }

  const gf_pool *pool_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// The random soak

struct SoakTotals {
  std::atomic<uint64_t> runs{0}, tasks{0}, waited{0}, fetched_while_running{0}, cancelled{0},
      destroyed_early{0}, fetches_ok{0}, fetches_early_ok{0}, fetches_not_ready{0};
};

struct Round {
  gf_pool *pool = nullptr;
  uint64_t capacity = 0;
  Clock::time_point deadline;
  std::atomic<bool> *stop = nullptr;  // set on a hang: every thread winds down
  SoakTotals *totals = nullptr;
  std::mutex m;
  std::vector<std::shared_ptr<CallbackLog>> logs;  // alive until the round's checks
};

// Reports a run that did not finish in time and stops the soak.
void report_hang(Round &r, gf_run *run, const GraphPlan &gp, const char *where) {
  finding("a run did not finish within " + std::to_string(kRunWaitMs / 1000) + " s",
          gp.label + " (" + where + ")\n  " + dump_run(run, gp) +
              "\n  devices:" + dump_devices(r.pool));
  r.stop->store(true);
}

// Fetches random fetchable buffers while the run is running; returns the final poll status
// (GF_TIMEOUT if it did not finish before `until`). A fetch that succeeds must be exact.
gf_status fetch_while_running(Round &r, gf_run *run, const GraphPlan &gp, Rng &rng,
                              Clock::time_point until, std::string *msg) {
  gf_status s = GF_TIMEOUT;
  while ((s = gf_run_poll(run)) == GF_TIMEOUT) {
    *msg = "";
    if (Clock::now() > until) return GF_TIMEOUT;
    if (gp.fetchable.empty()) {
      std::this_thread::sleep_for(200us);
      continue;
    }
    const int i = gp.fetchable[static_cast<size_t>(rng.below(gp.fetchable.size()))];
    const Fetched f = fetch_and_check(run, gp, gp.data[static_cast<size_t>(i)], rng, nullptr, true);
    if (f == Fetched::Ok) r.totals->fetches_early_ok.fetch_add(1);
    if (f == Fetched::NotAvailable) r.totals->fetches_not_ready.fetch_add(1);
    if (f == Fetched::Bad) r.stop->store(true);
  }
  *msg = last_error();
  return s;
}

void execute_one(Round &r, GraphPlan &gp, Rng &rng) {
  std::shared_ptr<CallbackLog> log;
  gf_submit_options opts = GF_SUBMIT_OPTIONS_INIT;
  if (rng.chance(0.5)) {
    log = std::make_shared<CallbackLog>();
    std::lock_guard<std::mutex> lock(r.m);
    r.logs.push_back(log);
    opts.on_complete = record_completion;
    opts.user_data = log.get();
  }
  gf_run *run = nullptr;
  const gf_status submitted = gf_graph_submit(&run, r.pool, gp.graph.get(), &opts);
  if (submitted != GF_OK) {
    ADD_FAILURE() << gp.label << ": gf_graph_submit -> " << describe(submitted);
    r.stop->store(true);
    if (log) log->calls.store(1);  // no run, no callback to wait for
    return;
  }
  r.totals->runs.fetch_add(1);
  r.totals->tasks.fetch_add(gp.tasks.size());
  if (rng.chance(0.5)) gp.graph.reset();  // runs keep the graph's contents alive

  const uint64_t plan = rng.below(100);
  const auto until = Clock::now() + std::chrono::milliseconds(kRunWaitMs);
  std::string msg;
  if (plan < 30) {  // wait, then check everything
    const gf_status s = gf_run_wait(run, kRunWaitMs);
    msg = last_error();
    if (s == GF_TIMEOUT)
      report_hang(r, run, gp, "gf_run_wait");
    else
      check_finished(run, gp, s, msg, false, log.get(), rng);
    r.totals->waited.fetch_add(1);
  } else if (plan < 52) {  // fetch kept buffers while it runs, then check everything
    const gf_status s = fetch_while_running(r, run, gp, rng, until, &msg);
    if (s == GF_TIMEOUT)
      report_hang(r, run, gp, "polling while fetching");
    else
      check_finished(run, gp, s, msg, false, log.get(), rng);
    r.totals->fetched_while_running.fetch_add(1);
  } else if (plan < 76) {  // another thread cancels at a random moment
    const auto delay = std::chrono::microseconds(rng.below(20000));
    std::thread canceller([run, delay] {
      std::this_thread::sleep_for(delay);
      const gf_status c = gf_run_cancel(run);
      EXPECT_EQ(c, GF_OK) << "gf_run_cancel -> " << describe(c);
    });
    gf_status s = GF_TIMEOUT;
    if (rng.chance(0.5)) s = fetch_while_running(r, run, gp, rng, until, &msg);
    if (s == GF_TIMEOUT && Clock::now() < until) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      s = gf_run_wait(run, std::max<int64_t>(1, left.count()));
      msg = last_error();
    }
    canceller.join();
    if (s == GF_TIMEOUT)
      report_hang(r, run, gp, "after gf_run_cancel");
    else
      check_finished(run, gp, s, msg, true, log.get(), rng);
    r.totals->cancelled.fetch_add(1);
  } else if (plan < 92) {  // destroyed while running, perhaps after a few fetches
    const auto stop_at = Clock::now() + std::chrono::microseconds(rng.below(10000));
    if (rng.chance(0.5)) {
      while (Clock::now() < stop_at && !gp.fetchable.empty()) {
        const int i = gp.fetchable[static_cast<size_t>(rng.below(gp.fetchable.size()))];
        if (fetch_and_check(run, gp, gp.data[static_cast<size_t>(i)], rng, nullptr, true) ==
            Fetched::Ok)
          r.totals->fetches_early_ok.fetch_add(1);
      }
    } else {
      std::this_thread::sleep_until(stop_at);
    }
    r.totals->destroyed_early.fetch_add(1);
  } else {  // cancelled, then destroyed without waiting
    GF_EXPECT_OK(gf_run_cancel(run));
    r.totals->destroyed_early.fetch_add(1);
  }
  gf_run_destroy(run);
}

void submitter(Round &r, uint64_t seed, const std::string &prefix) {
  SCOPED_TRACE(seed_note() + ", submitter " + prefix);
  Rng rng(seed);
  GenLimits lim;
  lim.device_capacity = r.capacity;
  for (int k = 0; !r.stop->load() && Clock::now() < r.deadline; ++k) {
    GraphPlan gp = build_graph(rng, lim, prefix + "g" + std::to_string(k));
    if (!gp.ok) {
      r.stop->store(true);
      break;
    }
    execute_one(r, gp, rng);
    if (::testing::Test::HasFatalFailure()) r.stop->store(true);
  }
}

// A fresh, small, failure-free graph that must run correctly on a pool that has been through a
// round.
void expect_pool_still_works(gf_pool *pool, uint64_t capacity, uint64_t seed,
                             const std::string &label) {
  Rng rng(seed);
  GenLimits lim;
  lim.device_capacity = capacity;
  lim.min_tasks = 10;
  lim.max_tasks = 20;
  lim.failures = false;
  lim.sleeps = false;
  GraphPlan gp = build_graph(rng, lim, label);
  ASSERT_TRUE(gp.ok) << label;
  gf_run *raw = nullptr;
  const gf_status s = gf_graph_submit(&raw, pool, gp.graph.get(), nullptr);
  ASSERT_EQ(s, GF_OK) << label << ": gf_graph_submit -> " << describe(s);
  RunPtr run(raw);
  const gf_status w = gf_run_wait(run.get(), kRunWaitMs);
  const std::string msg = last_error();
  ASSERT_NE(w, GF_TIMEOUT) << label << ": a fresh graph did not finish within " << kRunWaitMs / 1000
                           << " s\n  " << dump_run(run.get(), gp);
  check_finished(run.get(), gp, w, msg, false, nullptr, rng);
}

// ---------------------------------------------------------------------------------------------
// The fixture: seed, watchdog, anomaly log

class Soak : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = current_test_name();
    seed_ = seed_for(name_);
    findings().reset();
    const auto limit = std::chrono::seconds(120 + static_cast<int64_t>(soak_seconds()));
    watchdog_.emplace(name_, limit);
    std::printf(
        "[soak] %s: base seed %llu (GPUFLOW_SOAK_SEED), budget %.1f s for the binary "
        "(GPUFLOW_SOAK_SECONDS)\n",
        name_.c_str(), static_cast<unsigned long long>(base_seed()), soak_seconds());
    std::fflush(stdout);
  }
  void TearDown() override {
    watchdog_.reset();
    if (findings().total() != 0)
      std::printf("[soak] %s: problems seen, by kind:%s\n", name_.c_str(),
                  findings().summary().c_str());
    if (HasFailure()) std::printf("[soak] %s failed; %s\n", name_.c_str(), seed_note().c_str());
  }
  // This test's share of the binary's time budget.
  Clock::duration budget(double share) const {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(soak_seconds() * share));
  }

  std::string name_;
  uint64_t seed_ = 0;
  std::optional<Watchdog> watchdog_;
};

std::string mib(uint64_t bytes) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << static_cast<double>(bytes) / static_cast<double>(MiB) << " MiB";
  return o.str();
}

// Random graphs from several threads on pools of tiny emulated devices, with random
// cancellations, fetches while running, early destruction, retries and failures, for 60 % of the
// time budget. Each pool lives for two rounds; after each round the pool must be idle and work.
TEST_F(Soak, RandomGraphsCancellationsFetchesAndSpilling) {
  SCOPED_TRACE(seed_note());
  Rng rng(seed_);
  const auto end = Clock::now() + budget(0.6);
  std::atomic<bool> stop{false};
  SoakTotals totals;
  // Completion logs outlive every pool: a callback of a destroyed run may run late.
  std::vector<std::shared_ptr<CallbackLog>> all_logs;
  int epochs = 0, rounds = 0;
  // The soak keeps going after a problem (each kind is reported once, then counted) and stops
  // early only when a run hangs.
  while (epochs == 0 || (Clock::now() < end && !stop.load() && !HasFatalFailure())) {
    ++epochs;
    const uint64_t memories[] = {8 * MiB, 12 * MiB, 16 * MiB, 24 * MiB, 32 * MiB, 48 * MiB};
    const int cpus = rng.pick(1, 2), devices = rng.pick(1, 2);
    const uint64_t memory = memories[rng.below(6)];
    const double bandwidth = rng.uniform(5e8, 5e9);
    const uint32_t gpu_threads = static_cast<uint32_t>(rng.pick(1, 2));
    gf_pool_config c = host_config(cpus, devices, memory, bandwidth, gpu_threads);
    c.spill_threshold = rng.uniform(0.3, 0.85);
    std::ostringstream desc;
    desc << "pool " << epochs << ": " << c.cpu_workers << " cpu, " << c.emulated_devices << " x "
         << mib(c.emulated_device_memory) << " devices (" << c.gpu_worker_threads
         << " threads), spill at " << c.spill_threshold << ", " << c.emulated_bandwidth / 1e9
         << " GB/s";
    SCOPED_TRACE(desc.str());
    Pool pool = make_pool(c);
    ASSERT_NE(pool, nullptr);
    for (int k = 0; k < 2 && (k == 0 || Clock::now() < end) && !stop.load(); ++k) {
      ++rounds;
      Round r;
      r.pool = pool.get();
      r.capacity = c.emulated_device_memory;
      r.stop = &stop;
      r.totals = &totals;
      const auto left = end - Clock::now();
      r.deadline = Clock::now() + std::clamp<Clock::duration>(left, 200ms, 2500ms);
      const int threads = rng.pick(2, 4);
      {
        InvariantSampler sampler(pool.get());
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
          const std::string prefix = "p" + std::to_string(epochs) + "r" + std::to_string(k) + "s" +
                                     std::to_string(t) + ".";
          ts.emplace_back(submitter, std::ref(r), rng.next(), prefix);
        }
        for (std::thread &t : ts) t.join();
      }
      const std::string when = desc.str() + ", after round " + std::to_string(k);
      for (const auto &log : r.logs) {
        if (!wait_until([&] { return log->calls.load() >= 1; }, 10000ms))
          finding("a run's completion callback never ran (runs destroyed before finishing)", when);
        if (log->calls.load() > 1) finding("a completion callback ran more than once", when);
      }
      all_logs.insert(all_logs.end(), r.logs.begin(), r.logs.end());
      if (stop.load()) break;  // a hang: the pool cannot be expected to be idle
      // A pool that is not idle would report the same leak every round: take a fresh one.
      if (!expect_pool_idle(pool.get(), when)) break;
      expect_pool_still_works(pool.get(), c.emulated_device_memory, rng.next(),
                              "fresh" + std::to_string(epochs) + "." + std::to_string(k));
      if (!expect_pool_idle(pool.get(), when + ", after a fresh graph")) break;
    }
    std::printf("[soak] %s:%s\n", desc.str().c_str(), dump_devices(pool.get()).c_str());
    pool.reset();
  }
  std::printf(
      "[soak] %d pools, %d rounds, %llu runs, %llu tasks: %llu waited, %llu fetched while "
      "running, %llu cancelled, %llu destroyed early; %llu fetches succeeded while "
      "running, %llu not ready yet\n",
      epochs, rounds, static_cast<unsigned long long>(totals.runs.load()),
      static_cast<unsigned long long>(totals.tasks.load()),
      static_cast<unsigned long long>(totals.waited.load()),
      static_cast<unsigned long long>(totals.fetched_while_running.load()),
      static_cast<unsigned long long>(totals.cancelled.load()),
      static_cast<unsigned long long>(totals.destroyed_early.load()),
      static_cast<unsigned long long>(totals.fetches_early_ok.load()),
      static_cast<unsigned long long>(totals.fetches_not_ready.load()));
  EXPECT_GT(totals.runs.load(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Adversarial findings, isolated

gf_device_memory device_memory(const gf_pool *pool, uint32_t d) {
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  GF_EXPECT_OK(gf_pool_device_memory(&m, pool, d));
  return m;
}

// A GPU task that checks its input (if any) against a pattern, sleeps, and writes a pattern.
Body pattern_body(std::string label, uint64_t in_size, uint64_t in_seed, uint64_t out_size,
                  uint64_t out_seed, std::chrono::microseconds sleep) {
  return [=](gf_task_ctx *ctx) {
    if (in_size != 0) {
      const void *p = nullptr;
      uint64_t n = 0;
      if (gf_task_ctx_input(&p, &n, ctx, 0) != GF_OK) {
        finding("body: gf_task_ctx_input failed", label + ": " + last_error());
        return 1;
      }
      if (n != in_size ||
          checksum(static_cast<const unsigned char *>(p), n) != pattern_checksum(in_size, in_seed))
        finding("body: an input does not hold what its producer wrote", label);
    }
    if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
    void *o = nullptr;
    if (gf_task_ctx_output(&o, ctx, 0, 0) != GF_OK) {
      finding("body: gf_task_ctx_output failed for a declared output", label + ": " + last_error());
      return 1;
    }
    fill_pattern(static_cast<unsigned char *>(o), out_size, out_seed);
    return 0;
  };
}

// (a) gf_run_fetch of kept buffers in a loop while the run is still running, on a 16 MiB device
// where the kept buffers are being spilled to make room for the rest of the graph. Every fetch
// that succeeds must return exactly the producer's bytes.
TEST_F(Soak, AdversarialFetchKeptBuffersWhileSpilling) {
  SCOPED_TRACE(seed_note());
  gf_pool_config c = host_config(1, 1, 16 * MiB, 2e9, 2);
  c.spill_threshold = 0.5;
  Pool pool = make_pool(c);
  ASSERT_NE(pool, nullptr);
  const auto end = Clock::now() + budget(0.1);
  constexpr uint64_t kSize = 4 * MiB;
  uint64_t ok_while_running = 0, not_ready = 0, iterations = 0;
  Rng rng(seed_);
  while (iterations < 2 || (Clock::now() < end && !HasFailure())) {
    ++iterations;
    GraphPlan gp;  // used for labels and fetch checks only
    gp.label = "fetch-while-spilling#" + std::to_string(iterations);
    gp.graph = make_graph();
    gf_graph *g = gp.graph.get();
    std::vector<gf_task> keepers;
    const uint64_t base = rng.next();
    for (int i = 0; i < 3; ++i) {
      DataPlan d;
      d.name = "kept" + std::to_string(i);
      d.size = kSize;
      d.keep = true;
      d.seed = base + static_cast<uint64_t>(i) * 0x1000000;
      d.checksum = pattern_checksum(d.size, d.seed);
      d.ref = must_add_buffer(g, d.name.c_str(), kSize, GF_DATA_KEEP);
      TaskSpec s;
      s.name = "keep" + std::to_string(i);
      s.priority = 10;
      s.outputs = {d.ref};
      s.gpu = pattern_body(gp.label + "/" + s.name, 0, 0, kSize, d.seed, 0us);
      keepers.push_back(must_add_task(g, s));
      gp.fetchable.push_back(static_cast<int>(gp.data.size()));
      gp.data.push_back(d);
    }
    // A chain of 4 MiB intermediates keeps the device over its spill threshold.
    gf_data prev{0};
    uint64_t prev_seed = 0;
    for (int i = 0; i < 24; ++i) {
      const uint64_t seed = base + 0x7000000 + static_cast<uint64_t>(i);
      gf_data out = must_add_buffer(g, ("churn" + std::to_string(i)).c_str(), kSize);
      TaskSpec s;
      s.name = "churn" + std::to_string(i);
      if (i > 0) s.inputs = {prev};
      if (i == 0) s.after = keepers;
      s.outputs = {out};
      s.gpu =
          pattern_body(gp.label + "/" + s.name, i > 0 ? kSize : 0, prev_seed, kSize, seed, 1000us);
      must_add_task(g, s);
      prev = out;
      prev_seed = seed;
    }
    RunPtr run(submit(pool.get(), g));
    ASSERT_NE(run, nullptr);
    const auto until = Clock::now() + std::chrono::milliseconds(kRunWaitMs);
    gf_status s = GF_TIMEOUT;
    size_t next = 0;
    while ((s = gf_run_poll(run.get())) == GF_TIMEOUT && Clock::now() < until) {
      const DataPlan &d = gp.data[next++ % gp.data.size()];
      const Fetched f = fetch_and_check(run.get(), gp, d, rng, nullptr, true);
      ok_while_running += f == Fetched::Ok;
      not_ready += f == Fetched::NotAvailable;
      ASSERT_NE(f, Fetched::Bad) << "while the run was running (iteration " << iterations
                                 << "):" << dump_devices(pool.get());
    }
    ASSERT_NE(s, GF_TIMEOUT) << gp.label << " did not finish within " << kRunWaitMs / 1000
                             << " s:" << dump_devices(pool.get());
    ASSERT_EQ(s, GF_OK) << gp.label << ": " << describe(s);
    for (const DataPlan &d : gp.data)
      ASSERT_EQ(fetch_and_check(run.get(), gp, d, rng), Fetched::Ok) << "after the run";
    run.reset();
    expect_pool_idle(pool.get(), gp.label);
  }
  const gf_device_memory m = device_memory(pool.get(), 0);
  std::printf(
      "[soak] %llu iterations: %llu fetches succeeded while running, %llu not ready; "
      "spilled %s in all\n",
      static_cast<unsigned long long>(iterations),
      static_cast<unsigned long long>(ok_while_running), static_cast<unsigned long long>(not_ready),
      mib(m.spilled_total).c_str());
  EXPECT_GT(m.spilled_total, 0u) << "nothing was spilled: this test did not exercise its case";
  EXPECT_GT(ok_while_running, 0u)
      << "no fetch succeeded while a run was running: this test did not exercise its case";
}

// `n` producers of `size` bytes (high priority, GPU) and `n` GPU consumers that check the bytes
// and write an 8-byte verdict (1 = intact).
struct FanGraph {
  Graph graph;
  std::vector<gf_data> verdicts;
};

FanGraph producers_then_consumers(int n, uint64_t size, uint64_t seed, const std::string &label) {
  FanGraph f;
  f.graph = make_graph();
  for (int i = 0; i < n; ++i) {
    const uint64_t s = seed + static_cast<uint64_t>(i);
    gf_data block = must_add_buffer(f.graph.get(), ("block" + std::to_string(i)).c_str(), size);
    gf_data verdict = must_add_buffer(f.graph.get(), ("verdict" + std::to_string(i)).c_str(), 8);
    TaskSpec produce;
    produce.name = "produce" + std::to_string(i);
    produce.priority = 10;
    produce.outputs = {block};
    produce.gpu = pattern_body(label + "/" + produce.name, 0, 0, size, s, 0us);
    must_add_task(f.graph.get(), produce);
    TaskSpec consume;
    consume.name = "consume" + std::to_string(i);
    consume.inputs = {block};
    consume.outputs = {verdict};
    consume.gpu = [size, s](gf_task_ctx *ctx) {
      const void *p = nullptr;
      uint64_t n_bytes = 0;
      if (gf_task_ctx_input(&p, &n_bytes, ctx, 0) != GF_OK) return 1;
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
      const int64_t ok = n_bytes == size && checksum(static_cast<const unsigned char *>(p),
                                                     n_bytes) == pattern_checksum(size, s);
      std::memcpy(out, &ok, 8);
      return 0;
    };
    must_add_task(f.graph.get(), consume);
    f.verdicts.push_back(verdict);
  }
  return f;
}

// (b) Two threads submit small graphs with kept 4 MiB outputs, wait and destroy the run, while
// two others run producer/consumer graphs on the same 48 MiB emulated device. Must not crash;
// every run must succeed with the right bytes.
TEST_F(Soak, AdversarialKeptOutputsAndProducerConsumerShareADevice) {
  SCOPED_TRACE(seed_note());
  Pool pool = make_pool(host_config(1, 1, 48 * MiB, 1e10, 2));
  ASSERT_NE(pool, nullptr);
  const auto end = Clock::now() + budget(0.15);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> kept_runs{0}, fan_runs{0};
  std::vector<std::thread> threads;
  {
    InvariantSampler sampler(pool.get());
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t, seed = seed_ + static_cast<uint64_t>(t) * 0x100000000ull] {
        SCOPED_TRACE(seed_note() + ", thread " + std::to_string(t));
        Rng rng(seed);
        for (int k = 0; !stop.load() && (k < 2 || Clock::now() < end); ++k) {
          const std::string label = "thread" + std::to_string(t) + "#" + std::to_string(k);
          gf_run *raw = nullptr;
          GraphPlan gp;  // kept outputs, for the small graphs
          FanGraph fan;
          if (t < 2) {
            gp.label = label;
            gp.graph = make_graph();
            for (int i = 0; i < 2; ++i) {
              DataPlan d;
              d.name = "kept" + std::to_string(i);
              d.size = 4 * MiB;
              d.seed = rng.next();
              d.checksum = pattern_checksum(d.size, d.seed);
              d.ref = must_add_buffer(gp.graph.get(), d.name.c_str(), d.size, GF_DATA_KEEP);
              TaskSpec s;
              s.name = "make" + std::to_string(i);
              s.outputs = {d.ref};
              s.gpu = pattern_body(label + "/" + s.name, 0, 0, d.size, d.seed, 0us);
              must_add_task(gp.graph.get(), s);
              gp.data.push_back(d);
            }
            const gf_status s = gf_graph_submit(&raw, pool.get(), gp.graph.get(), nullptr);
            EXPECT_EQ(s, GF_OK) << label << ": " << describe(s);
          } else {
            fan = producers_then_consumers(3, 8 * MiB, rng.next(), label);
            const gf_status s = gf_graph_submit(&raw, pool.get(), fan.graph.get(), nullptr);
            EXPECT_EQ(s, GF_OK) << label << ": " << describe(s);
          }
          if (raw == nullptr) {
            stop.store(true);
            break;
          }
          RunPtr run(raw);
          const gf_status w = gf_run_wait(run.get(), kRunWaitMs);
          if (w == GF_TIMEOUT) {
            ADD_FAILURE() << label << ": did not finish within " << kRunWaitMs / 1000
                          << " s:" << dump_devices(pool.get());
            stop.store(true);
            break;
          }
          EXPECT_EQ(w, GF_OK) << label << ": " << describe(w);
          if (t < 2) {
            if (rng.chance(0.5)) {
              for (const DataPlan &d : gp.data)
                EXPECT_EQ(fetch_and_check(run.get(), gp, d, rng), Fetched::Ok) << label;
            }
            kept_runs.fetch_add(1);
          } else {
            for (gf_data v : fan.verdicts) {
              int64_t ok = 0;
              uint64_t size = 0;
              const gf_status f = gf_run_fetch(&size, run.get(), v, &ok, sizeof ok);
              EXPECT_EQ(f, GF_OK) << label << ": " << describe(f);
              EXPECT_EQ(ok, 1) << label << ": a consumer saw altered bytes";
            }
            fan_runs.fetch_add(1);
          }
          run.reset();  // destroyed right after the wait, while spills may still be under way
          if (HasFailure()) stop.store(true);
        }
      });
    }
    for (std::thread &t : threads) t.join();
  }
  std::printf("[soak] %llu kept-output runs, %llu producer/consumer runs:%s\n",
              static_cast<unsigned long long>(kept_runs.load()),
              static_cast<unsigned long long>(fan_runs.load()), dump_devices(pool.get()).c_str());
  if (!stop.load()) expect_pool_idle(pool.get(), "after the threads");
}

// (c) A task with three 30 MiB inputs on a 64 MiB device can never have them all on the device.
// It must finish within 20 s: succeed, or fail with an out-of-memory error naming the task;
// never hang. Inputs come from producers on the device, or from host buffers.
TEST_F(Soak, AdversarialThreeLargeInputsOnASmallDeviceNeverHang) {
  SCOPED_TRACE(seed_note());
  constexpr uint64_t kSize = 30 * MiB;
  for (int variant = 0; variant < 2; ++variant) {
    const std::string label =
        variant == 0 ? "inputs produced on the device" : "inputs from host buffers";
    SCOPED_TRACE(label);
    Pool pool = make_pool(host_config(1, 1, 64 * MiB, 1e10, 2));
    ASSERT_NE(pool, nullptr);
    Graph g = make_graph();
    std::vector<std::pair<std::string, gf_task>> tasks;
    std::vector<gf_data> inputs;
    std::vector<uint64_t> seeds;
    for (int i = 0; i < 3; ++i) {
      const uint64_t seed = seed_ + static_cast<uint64_t>(i);
      seeds.push_back(seed);
      gf_data d{0};
      const std::string name = "big" + std::to_string(i);
      if (variant == 0) {
        d = must_add_buffer(g.get(), name.c_str(), kSize);
        TaskSpec s;
        s.name = "produce" + std::to_string(i);
        s.outputs = {d};
        s.gpu = pattern_body(s.name, 0, 0, kSize, seed, 0us);
        tasks.emplace_back(s.name, must_add_task(g.get(), s));
      } else {
        const std::vector<unsigned char> bytes = pattern(kSize, seed);
        GF_ASSERT_OK(gf_graph_add_host_buffer(&d, g.get(), name.c_str(), bytes.data(), kSize, 0));
      }
      inputs.push_back(d);
    }
    gf_data verdict = must_add_buffer(g.get(), "verdict", 8, GF_DATA_KEEP);
    TaskSpec s;
    s.name = "needs_three_30MiB_inputs";
    s.inputs = inputs;
    s.outputs = {verdict};
    if (variant == 0) s.resources = {{"GPU", 1.0}};
    s.gpu = [seeds](gf_task_ctx *ctx) {
      int64_t ok = 1;
      for (uint32_t i = 0; i < 3; ++i) {
        const void *p = nullptr;
        uint64_t n = 0;
        if (gf_task_ctx_input(&p, &n, ctx, i) != GF_OK) return 1;
        ok =
            ok && n == kSize &&
            checksum(static_cast<const unsigned char *>(p), n) == pattern_checksum(kSize, seeds[i]);
      }
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
      std::memcpy(out, &ok, 8);
      return 0;
    };
    const gf_task consumer = must_add_task(g.get(), s);
    tasks.emplace_back(s.name, consumer);
    RunPtr run(submit(pool.get(), g.get()));
    ASSERT_NE(run, nullptr);
    const auto started = Clock::now();
    const gf_status w = gf_run_wait(run.get(), 20000);
    const std::string msg = last_error();
    const double took = std::chrono::duration<double>(Clock::now() - started).count();
    std::printf("[soak] %s: gf_run_wait -> %s after %.2f s: %s\n", label.c_str(), gf_status_name(w),
                took, msg.c_str());
    if (w == GF_TIMEOUT) {  // reported; the other variant still runs
      ADD_FAILURE() << "still running after 20 s: " << dump_tasks(run.get(), tasks)
                    << "\n  devices:" << dump_devices(pool.get());
    } else if (w == GF_OK) {
      int64_t ok = 0;
      uint64_t size = 0;
      GF_EXPECT_OK(gf_run_fetch(&size, run.get(), verdict, &ok, sizeof ok));
      EXPECT_EQ(ok, 1) << "the consumer saw altered inputs";
    } else {
      EXPECT_TRUE(w == GF_ERR_TASK_FAILED || w == GF_ERR_OUT_OF_MEMORY)
          << gf_status_name(w) << ": " << msg;
      EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
      EXPECT_NE(msg.find(s.name), std::string::npos) << "the message should name the task: " << msg;
      EXPECT_EQ(task_state(run.get(), consumer), GF_TASK_FAILED);
      for (size_t i = 0; i + 1 < tasks.size(); ++i)
        EXPECT_EQ(task_state(run.get(), tasks[i].second), GF_TASK_SUCCEEDED)
            << tasks[i].first << " fits on the device and must succeed";
    }
    run.reset();
    expect_pool_idle(pool.get(), label);
  }
}

// (d) A completion callback that calls gf_run_state_get on its own run handle after the owner
// called gf_run_destroy (the run finishes because of the destroy, on the destroying thread or on
// a worker thread afterwards) must get GF_OK: the handle stays valid for the callback.
struct SelfQuery {
  std::atomic<int> calls{0};
  std::atomic<int> status{1000};
  std::atomic<int> state{0};
  std::atomic<int> callback_state{0};
  std::atomic<bool> destroy_called{false};
  std::atomic<bool> after_destroy{false};
};

extern "C" void query_own_run(gf_run *run, gf_run_state state, void *user) {
  auto *q = static_cast<SelfQuery *>(user);
  q->after_destroy.store(q->destroy_called.load());
  gf_run_state st = GF_RUN_STATE_FORCE32;
  const gf_status s = gf_run_state_get(&st, run);
  q->status.store(static_cast<int>(s));
  q->state.store(static_cast<int>(st));
  q->callback_state.store(static_cast<int>(state));
  q->calls.fetch_add(1);
}

TEST_F(Soak, AdversarialCallbackQueriesItsRunAfterOwnerDestroyedIt) {
  SCOPED_TRACE(seed_note());
  std::vector<std::shared_ptr<SelfQuery>> queries;  // outlive every run and the pool
  Pool pool = make_pool(host_config(1, -1));        // one CPU worker, no devices
  ASSERT_NE(pool, nullptr);
  Rng rng(seed_);
  const auto end = Clock::now() + budget(0.05);
  int iterations = 0, after_destroy = 0;
  const char *variants[] = {"running body finishes after the destroy",
                            "queued task cancelled by "
                            "the destroy",
                            "destroy races with natural completion"};
  while (iterations < 9 || (Clock::now() < end && !HasFailure())) {
    const int variant = iterations++ % 3;
    SCOPED_TRACE(std::string(variants[variant]) + ", iteration " + std::to_string(iterations));
    auto q = std::make_shared<SelfQuery>();
    queries.push_back(q);
    gf_submit_options opts = GF_SUBMIT_OPTIONS_INIT;
    opts.on_complete = query_own_run;
    opts.user_data = q.get();

    auto started = std::make_shared<std::atomic<bool>>(false);
    auto release = std::make_shared<std::atomic<bool>>(false);
    Graph blocker_graph;
    RunPtr blocker;
    if (variant == 1) {  // the only worker is busy with another run: the target stays queued
      blocker_graph = make_graph();
      TaskSpec b;
      b.name = "blocker";
      b.cpu = [started, release](gf_task_ctx *) {
        started->store(true);
        wait_until([&] { return release->load(); }, 20000ms);
        return 0;
      };
      must_add_task(blocker_graph.get(), b);
      blocker.reset(submit(pool.get(), blocker_graph.get()));
      ASSERT_NE(blocker, nullptr);
      ASSERT_TRUE(wait_until([&] { return started->load(); }));
    }
    Graph g = make_graph();
    for (int i = 0; i < (variant == 2 ? 3 : 1); ++i) {
      TaskSpec t;
      t.name = "task" + std::to_string(i);
      if (variant == 0) {
        t.cpu = [started](gf_task_ctx *ctx) {
          started->store(true);
          wait_until([&] { return gf_task_ctx_cancelled(ctx) != 0; }, 20000ms);
          std::this_thread::sleep_for(2ms);  // finish well after gf_run_destroy returned
          return 0;
        };
      } else {
        t.cpu = [](gf_task_ctx *) { return 0; };
      }
      must_add_task(g.get(), t);
    }
    gf_run *run = nullptr;
    GF_ASSERT_OK(gf_graph_submit(&run, pool.get(), g.get(), &opts));
    if (variant == 0) {
      ASSERT_TRUE(wait_until([&] { return started->load(); }));
    }
    if (variant == 2) std::this_thread::sleep_for(std::chrono::microseconds(rng.below(500)));
    q->destroy_called.store(true);
    gf_run_destroy(run);
    release->store(true);
    if (blocker) GF_EXPECT_OK(gf_run_wait(blocker.get(), kWaitMs));
    ASSERT_TRUE(wait_until([&] { return q->calls.load() >= 1; }, 10000ms))
        << "the completion callback never ran";
    std::this_thread::sleep_for(1ms);
    const std::string where =
        std::string(variants[variant]) + ", iteration " + std::to_string(iterations) +
        (q->after_destroy.load() ? ", the callback ran after gf_run_destroy"
                                 : ", the callback ran before gf_run_destroy");
    if (q->calls.load() != 1)
      finding("the completion callback did not run exactly once",
              where + ": " + std::to_string(q->calls.load()) + " calls");
    const auto status = static_cast<gf_status>(q->status.load());
    if (status != GF_OK)
      finding(std::string(variants[variant]) + ": gf_run_state_get on its own run inside the " +
                  "completion callback -> " + gf_status_name(status) + " (want GF_OK)",
              where);
    else if (q->state.load() != q->callback_state.load())
      finding("gf_run_state_get inside the callback disagrees with the state it was given",
              where + ": " + std::to_string(q->state.load()) + " vs " +
                  std::to_string(q->callback_state.load()));
    after_destroy += q->after_destroy.load();
  }
  std::printf("[soak] %d iterations, %d callbacks ran after gf_run_destroy was called\n",
              iterations, after_destroy);
  expect_ledger_idle(pool.get());
  pool.reset();
}

}  // namespace
