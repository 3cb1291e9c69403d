// amounts_test.cpp: resource amounts and data sizes at the edges of what gpuflow represents.
// Amounts are fixed point (1/10000) in 64 bits, and bytes become gpu_memory amounts, so every
// amount or size that cannot be represented, or whose sums could overflow, must be refused where
// it enters (gf_graph_add_*, gf_pool_create, gf_task_ctx_output, documents) with a message naming
// it; everything accepted must run without overflow (the ASan + UBSan build checks that).
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// Creates a pool that must be refused; returns the message.
std::string refused_pool(const gf_pool_config &c) {
  gf_pool *p = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &c));
  EXPECT_EQ(p, nullptr);
  gf_pool_destroy(p);
  return m;
}

TaskSpec noop_task(const std::string &name, std::vector<gf_resource> resources) {
  TaskSpec s;
  s.name = name;
  s.cpu = [](gf_task_ctx *) { return 0; };
  s.gpu = [](gf_task_ctx *) { return 0; };
  s.resources = std::move(resources);
  return s;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name)) old_ = std::make_unique<std::string>(old);
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char *name_;
  std::unique_ptr<std::string> old_;
};

}  // namespace

// ---- Pool labels -----------------------------------------------------------------------------

TEST(Amounts, LabelsNamedLikeBuiltInResourcesAreRefused) {
  for (const char *name : {"cpu", "GPU", "gpu_memory"}) {
    const gf_resource labels[] = {{"bigmem", 1.0}, {name, 1.0}};
    for (bool gpu_list : {false, true}) {
      gf_pool_config c = host_config(1, 1);
      if (gpu_list) {
        c.gpu_worker_labels = labels;
        c.gpu_worker_label_count = 2;
      } else {
        c.cpu_worker_labels = labels;
        c.cpu_worker_label_count = 2;
      }
      std::string m = refused_pool(c);
      EXPECT_TRUE(contains(m, std::string("'") + name + "'")) << m;
      EXPECT_TRUE(contains(m, gpu_list ? "gpu_worker_labels[1]" : "cpu_worker_labels[1]")) << m;
    }
  }
}

TEST(Amounts, DuplicateLabelsAreRefused) {
  // Summed, these two overflowed the ledger's 64-bit capacity.
  const gf_resource labels[] = {{"big", 1e14}, {"other", 1}, {"big", 1e14}};
  gf_pool_config c = host_config(1, 1);
  c.gpu_worker_labels = labels;
  c.gpu_worker_label_count = 3;
  std::string m = refused_pool(c);
  EXPECT_TRUE(contains(m, "'big'")) << m;
  EXPECT_TRUE(contains(m, "gpu_worker_labels[2]")) << m;
}

TEST(Amounts, LabelAmountsThatRoundToZeroAreRefused) {
  const gf_resource labels[] = {{"tiny", 0.00001}};
  gf_pool_config c = host_config(1, -1);
  c.cpu_worker_labels = labels;
  c.cpu_worker_label_count = 1;
  std::string m = refused_pool(c);
  EXPECT_TRUE(contains(m, "'tiny'")) << m;
}

TEST(Amounts, LabelsAtTheTopOfTheRangeWork) {
  const gf_resource labels[] = {{"huge", 1e14}, {"zero", 0}};
  gf_pool_config c = host_config(1, -1);
  c.cpu_worker_labels = labels;
  c.cpu_worker_label_count = 2;
  Pool pool = make_pool(c);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(ledger(pool.get(), 0, "huge").capacity, 1e14);
  EXPECT_EQ(ledger(pool.get(), 0, "cpu").capacity, 1.0);
  Graph g = make_graph();
  for (int i = 0; i < 4; ++i) {
    must_add_task(g.get(), noop_task("top" + std::to_string(i), {{"huge", 1e14}, {"cpu", 1}}));
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(ledger(pool.get(), 0, "huge").peak_in_use, 1e14);
  EXPECT_EQ(total_in_use(pool.get()), 0.0);
}

// ---- Pool memory -----------------------------------------------------------------------------

TEST(Amounts, DeviceMemoryAboveTheLimitIsRefused) {
  {
    gf_pool_config c = host_config(1, 1, GF_MAX_DATA_SIZE + 1);
    EXPECT_TRUE(contains(refused_pool(c), "emulated_device_memory"));
  }
  {
    gf_pool_config c = host_config(1, 1);
    c.device_memory_limit = std::numeric_limits<uint64_t>::max();
    EXPECT_TRUE(contains(refused_pool(c), "device_memory_limit"));
  }
  for (const char *bad : {"1e30", "-5", "nan", "1.5"}) {
    ScopedEnv env("GPUFLOW_EMULATED_DEVICE_MEMORY", bad);
    gf_pool_config c = host_config(1, 1, 0);
    std::string m = refused_pool(c);
    EXPECT_TRUE(contains(m, "GPUFLOW_EMULATED_DEVICE_MEMORY")) << bad << ": " << m;
  }
  {
    ScopedEnv env("GPUFLOW_DEVICE_MEMORY_LIMIT", "1e30");
    std::string m = refused_pool(host_config(1, 1));
    EXPECT_TRUE(contains(m, "GPUFLOW_DEVICE_MEMORY_LIMIT")) << m;
  }
  for (const char *variable : {"GPUFLOW_CPU_WORKERS", "GPUFLOW_EMULATED_DEVICES"}) {
    ScopedEnv env(variable, "1e300");
    gf_pool_config c = host_config(0, 0);
    std::string m = refused_pool(c);
    EXPECT_TRUE(contains(m, variable)) << m;
  }
}

// Processes started on leased devices (Dask workers, Snakemake jobs) get their pools' device
// memory limit from the environment; the config field, when set, wins.
TEST(Amounts, DeviceMemoryLimitComesFromTheEnvironmentWhenNotConfigured) {
  ScopedEnv env("GPUFLOW_DEVICE_MEMORY_LIMIT", "16777216");
  for (uint64_t configured : {uint64_t{0}, uint64_t{32} << 20}) {
    gf_pool_config c = host_config(1, 1, 64ull << 20);
    c.device_memory_limit = configured;
    Pool pool = make_pool(c);
    gf_device_memory memory = GF_DEVICE_MEMORY_INIT;
    GF_ASSERT_OK(gf_pool_device_memory(&memory, pool.get(), 0));
    EXPECT_EQ(memory.capacity, configured ? configured : uint64_t{16} << 20);
  }
}

// ---- Task requests ---------------------------------------------------------------------------

TEST(Amounts, DuplicateResourcesInATaskAreRefused) {
  Graph g = make_graph();
  const std::vector<std::vector<gf_resource>> lists = {
      {{"GPU", 0.5}, {"GPU", 0.5}},
      {{"GPU", 0}, {"GPU", 1}},  // a zero amount is still a mention
      {{"bigmem", 1e14}, {"cpu", 1}, {"bigmem", 1e14}},
  };
  for (const auto &list : lists) {
    gf_task t{0};
    std::string m =
        GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, g.get(), noop_task("dup", list)));
    EXPECT_TRUE(contains(m, "'dup'")) << m;
    EXPECT_TRUE(contains(m, std::string("'") + list.back().name + "'")) << m;
  }
  uint64_t count = 99;
  GF_EXPECT_OK(gf_graph_task_count(&count, g.get()));
  EXPECT_EQ(count, 0u);
}

TEST(Amounts, PositiveAmountsThatRoundToZeroAreRefused) {
  Graph g = make_graph();
  for (const char *name : {"GPU", "cpu", "gpu_memory", "bigmem"}) {
    for (double amount : {0.00001, 0.00004, 1e-300, std::numeric_limits<double>::denorm_min()}) {
      gf_task t{0};
      std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                                       add_task(&t, g.get(), noop_task("speck", {{name, amount}})));
      EXPECT_TRUE(contains(m, "'speck'")) << m;
      EXPECT_TRUE(contains(m, std::string("'") + name + "'")) << m;
    }
  }
  // The smallest unit and zero are fine.
  gf_task t{0};
  GF_EXPECT_OK(add_task(&t, g.get(), noop_task("unit", {{"GPU", 0.0001}})));
  GF_EXPECT_OK(add_task(&t, g.get(), noop_task("none", {{"GPU", 0}})));
  GF_EXPECT_OK(add_task(&t, g.get(), noop_task("top", {{"GPU", 1e14}})));
}

TEST(Amounts, SmallestGpuUnitRunsOnAGpuWorker) {
  // GPU=0.00001 used to round to no request at all, and ran on a CPU worker; it is refused now
  // (above), and the smallest unit is a real GPU request.
  Pool pool = make_pool(host_config(2, 1));
  Graph g = make_graph();
  auto kinds = std::make_shared<std::vector<gf_worker_kind>>();
  TaskSpec s = noop_task("small_gpu", {{"GPU", 0.0001}});
  s.cpu = [kinds](gf_task_ctx *ctx) {
    kinds->push_back(task_env(ctx).kind);
    return 0;
  };
  s.gpu = s.cpu;
  must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  ASSERT_EQ(kinds->size(), 1u);
  EXPECT_EQ((*kinds)[0], GF_WORKER_GPU);
}

// ---- Data sizes ------------------------------------------------------------------------------

TEST(Amounts, SizesAboveTheLimitAreRefusedNamingTheData) {
  Graph g = make_graph();
  gf_data d{0};
  for (uint64_t size : {GF_MAX_DATA_SIZE + 1, uint64_t{1} << 50, uint64_t{1} << 63,
                        std::numeric_limits<uint64_t>::max()}) {
    gf_buffer_desc b = GF_BUFFER_DESC_INIT;
    b.name = "vast";
    b.size = size;
    std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_buffer(&d, g.get(), &b));
    EXPECT_TRUE(contains(m, "'vast'")) << m;
    EXPECT_TRUE(contains(m, "size")) << m;
    static const char byte = 0;
    m = GF_EXPECT_STATUS(
        GF_ERR_INVALID_ARGUMENT,
        gf_graph_add_host_buffer(&d, g.get(), "lent", &byte, size, GF_HOST_BUFFER_BORROW));
    EXPECT_TRUE(contains(m, "'lent'")) << m;
    m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                         gf_graph_add_value(&d, g.get(), "guess", size, 0));
    EXPECT_TRUE(contains(m, "'guess'")) << m;
    m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                         gf_graph_add_host_value(&d, g.get(), "hv", nullptr, nullptr, size));
    EXPECT_TRUE(contains(m, "'hv'")) << m;
  }
  uint64_t count = 99;
  GF_EXPECT_OK(gf_graph_data_count(&count, g.get()));
  EXPECT_EQ(count, 0u);
  must_add_buffer(g.get(), "largest", GF_MAX_DATA_SIZE);
}

TEST(Amounts, OutputsTogetherAboveTheLimitAreRefused) {
  Graph g = make_graph();
  TaskSpec s = noop_task("hoarder", {});
  for (int i = 0; i < 3; ++i) {
    s.outputs.push_back(must_add_buffer(g.get(), nullptr, GF_MAX_DATA_SIZE / 2));
  }
  gf_task t{0};
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, g.get(), s));
  EXPECT_TRUE(contains(m, "'hoarder'")) << m;
  s.outputs.pop_back();
  s.name = "exactly";
  GF_EXPECT_OK(add_task(&t, g.get(), s));
}

TEST(Amounts, LargestSizesAndRequestsFailAsOutOfMemoryWithoutOverflow) {
  // The largest output and gpu_memory request the ABI accepts, on a small device: the scheduler
  // adds them up (request + outputs + in use) and must report out of memory, not overflow.
  Pool pool = make_pool(host_config(1, 1, 1 << 20));
  Graph g = make_graph();
  gf_data out = must_add_buffer(g.get(), "largest", GF_MAX_DATA_SIZE);
  TaskSpec s;
  s.name = "greedy";
  s.gpu = [](gf_task_ctx *) { return 0; };
  s.resources = {{"gpu_memory", 1 << 20}, {"GPU", 1}};
  s.outputs = {out};
  gf_task t = must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  std::string m = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), kWaitMs));
  EXPECT_TRUE(contains(m, "greedy")) << m;
  const char *error = nullptr;
  GF_ASSERT_OK(gf_run_task_error(&error, run.get(), t));
  EXPECT_TRUE(contains(error, "out of memory")) << error;
  EXPECT_EQ(total_in_use(pool.get()), 0.0);
}

TEST(Amounts, OutputSizedAtRunTimeAboveTheLimitIsRefused) {
  Pool pool = make_pool(host_config(-1, 1, 1 << 20));
  Graph g = make_graph();
  gf_data out = must_add_buffer(g.get(), "later", 0, GF_DATA_KEEP);
  struct Seen {
    gf_status huge = GF_OK, largest = GF_OK;
    std::string message;
  };
  auto seen = std::make_shared<Seen>();
  TaskSpec s;
  s.name = "sizer";
  s.outputs = {out};
  s.gpu = [seen](gf_task_ctx *ctx) {
    void *p = nullptr;
    seen->huge = gf_task_ctx_output(&p, ctx, 0, std::numeric_limits<uint64_t>::max());
    seen->message = last_error();
    seen->largest = gf_task_ctx_output(&p, ctx, 0, GF_MAX_DATA_SIZE);  // does not fit 1 MiB
    if (gf_task_ctx_output(&p, ctx, 0, 8) != GF_OK) return 1;
    std::memset(p, 7, 8);
    return 0;
  };
  must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(seen->huge, GF_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(seen->message, "sizer")) << seen->message;
  EXPECT_EQ(seen->largest, GF_ERR_OUT_OF_MEMORY);
  std::vector<unsigned char> bytes = fetch(run.get(), out);
  EXPECT_EQ(bytes, std::vector<unsigned char>(8, 7));
  run.reset();  // frees the kept output
  EXPECT_TRUE(wait_until([&] { return total_in_use(pool.get()) == 0.0; }));
}

// ---- Documents -------------------------------------------------------------------------------

namespace {

std::string read_document(const std::string &json) {
  gf_graph *g = nullptr;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INVALID_GRAPH,
                       gf_graph_deserialize(&g, json.data(), json.size(), GF_GRAPH_FORMAT_JSON, 0));
  EXPECT_EQ(g, nullptr);
  gf_graph_destroy(g);
  return m;
}

std::string task_document(const std::string &data, const std::string &outputs,
                          const std::string &resources) {
  return R"({"data": [)" + data +
         R"(], "tasks": [{"name": "doc_task", "kernel": "k", "outputs": [)" + outputs +
         R"(], "resources": [)" + resources + "]}]}";
}

}  // namespace

TEST(Amounts, DocumentsWithUnrepresentableAmountsAreRefused) {
  // 2^50 bytes used to be accepted, and overflowed as gpu_memory.
  std::string m = read_document(task_document(R"({"name": "vast", "size": 1125899906842624})", "0",
                                              R"({"name": "GPU", "amount": 1})"));
  EXPECT_TRUE(contains(m, "'vast'")) << m;
  m = read_document(task_document(
      R"({"name": "half1", "size": 60000000000000}, {"name": "half2", "size": 60000000000000})",
      "0, 1", ""));
  EXPECT_TRUE(contains(m, "doc_task")) << m;
  for (const char *resources :
       {R"({"name": "GPU", "amount": 0.00001})", R"({"name": "GPU", "amount": 1e15})",
        R"({"name": "GPU", "amount": 0.5}, {"name": "GPU", "amount": 0.5})"}) {
    m = read_document(task_document(R"({"name": "out", "size": 8})", "0", resources));
    EXPECT_TRUE(contains(m, "doc_task")) << resources << ": " << m;
    EXPECT_TRUE(contains(m, "'GPU'")) << resources << ": " << m;
  }
  // The largest size is accepted.
  const std::string ok = task_document(R"({"name": "largest", "size": 100000000000000})", "0", "");
  gf_graph *g = nullptr;
  GF_EXPECT_OK(gf_graph_deserialize(&g, ok.data(), ok.size(), GF_GRAPH_FORMAT_JSON, 0));
  gf_graph_destroy(g);
}
