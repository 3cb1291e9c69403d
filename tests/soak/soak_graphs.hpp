// Soak machinery, part 2: task bodies that write and check byte patterns, and random graph
// plans built from them.
#pragma once

#include "soak_basics.hpp"

namespace soak {

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

inline const char *kind_name(gf_worker_kind k) {
  return k == GF_WORKER_CPU ? "cpu" : k == GF_WORKER_GPU ? "gpu" : "?";
}

inline int soak_body(gf_task_ctx *ctx, const BodyPlan &p, gf_worker_kind body_kind) {
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

inline uint64_t pick_size(Rng &rng, uint64_t large) {
  const uint64_t r = rng.below(100);
  if (r < 65) return rng.range(1, 4096);
  if (r < 90) return rng.range(4 * KiB, std::max<uint64_t>(4 * KiB, std::min(256 * KiB, large)));
  return rng.range(large / 4, large);
}

inline GraphPlan build_graph(Rng &rng, const GenLimits &lim, std::string label) {
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

}  // namespace soak
