// abi_errors_test.cpp: the C ABI's error conventions — null, stale and forged handles, null out
// pointers, unknown struct sizes, bad amounts, references from another graph, version mismatch,
// and gf_last_error's contract.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "test_support.hpp"

using namespace gft;

namespace {

bool contains(const std::string &hay, const std::string &needle) {
  return hay.find(needle) != std::string::npos;
}

// A block of readable garbage to forge handles from.
alignas(64) unsigned char g_forged[512];

int noop_body(gf_task_ctx *, void *) {
  return 0;
}

std::atomic<int> g_destroyed{0};
void count_destroy(void *) {
  g_destroyed.fetch_add(1);
}

// A graph with one kept 16-byte output produced by one task: shape shared by several tests.
struct OneTask {
  Graph graph;
  gf_data out{0};
  gf_task task{0};
};

OneTask one_task_graph(const char *task_name) {
  OneTask o;
  o.graph = make_graph();
  o.out = must_add_buffer(o.graph.get(), "out", 16, GF_DATA_KEEP);
  TaskSpec s;
  s.name = task_name;
  s.outputs = {o.out};
  s.cpu = [](gf_task_ctx *ctx) { return write_pattern(ctx, 0, 16, 1) ? 0 : 1; };
  o.task = must_add_task(o.graph.get(), s);
  return o;
}

TEST(AbiErrors, NullHandlesAreInvalidHandle) {
  uint32_t n = 0;
  uint64_t n64 = 0;
  gf_data d{0};
  gf_task t{0};
  gf_run *r = nullptr;
  gf_run_state rs{};
  gf_buffer_desc bd = GF_BUFFER_DESC_INIT;
  gf_task_desc td = GF_TASK_DESC_INIT;
  td.cpu_fn = noop_body;

  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_pool_worker_count(&n, nullptr));
  EXPECT_FALSE(m.empty());
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_task_count(&n64, nullptr));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_add_buffer(&d, nullptr, &bd));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_add_task(&t, nullptr, &td));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_wait(nullptr, 0));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_poll(nullptr));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_cancel(nullptr));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_state_get(&rs, nullptr));

  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_submit(&r, nullptr, g.get(), nullptr));
  EXPECT_EQ(r, nullptr);
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_submit(&r, pool.get(), nullptr, nullptr));
  EXPECT_EQ(r, nullptr);

  // Destroy functions accept NULL.
  gf_pool_destroy(nullptr);
  gf_graph_destroy(nullptr);
  gf_run_destroy(nullptr);
}

TEST(AbiErrors, DestroyedHandlesAreInvalidAndDoubleDestroyIsHarmless) {
  gf_pool *pool = nullptr;
  gf_pool_config cfg = host_config(1, -1);
  GF_ASSERT_OK(gf_pool_create(&pool, &cfg));

  OneTask o = one_task_graph("stale");
  gf_run *run = submit(pool, o.graph.get());
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run, kWaitMs));
  gf_run_destroy(run);

  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_poll(run));
  gf_run_state rs{};
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_state_get(&rs, run));
  uint64_t size = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_fetch(&size, run, o.out, nullptr, 0));
  gf_run_destroy(run);  // already destroyed: ignored

  gf_graph *g = o.graph.release();
  gf_graph_destroy(g);
  uint64_t count = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_task_count(&count, g));
  gf_graph_destroy(g);

  gf_pool_destroy(pool);
  uint32_t n = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_pool_worker_count(&n, pool));
  Graph g2 = make_graph();
  gf_run *r2 = nullptr;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_submit(&r2, pool, g2.get(), nullptr));
  EXPECT_EQ(r2, nullptr);
  gf_pool_destroy(pool);
}

TEST(AbiErrors, ForgedHandlesAreInvalidHandle) {
  std::memset(g_forged, 0xAB, sizeof g_forged);
  auto *fp = reinterpret_cast<gf_pool *>(g_forged);
  auto *fg = reinterpret_cast<gf_graph *>(g_forged);
  auto *fr = reinterpret_cast<gf_run *>(g_forged);
  uint32_t n = 0;
  uint64_t n64 = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_pool_worker_count(&n, fp));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_graph_task_count(&n64, fg));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_poll(fr));

  // A live handle of another type is forged too.
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE,
                   gf_graph_task_count(&n64, reinterpret_cast<gf_graph *>(pool.get())));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_poll(reinterpret_cast<gf_run *>(g.get())));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE,
                   gf_pool_worker_count(&n, reinterpret_cast<gf_pool *>(g.get())));
}

TEST(AbiErrors, NullOutPointersAreInvalidArgument) {
  gf_pool_config cfg = host_config(1, -1);
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(nullptr, &cfg));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_create(nullptr));

  Pool pool = make_pool(cfg);
  OneTask o = one_task_graph("nullout");
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_worker_count(nullptr, pool.get()));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_worker_info(nullptr, pool.get(), 0));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_ledger_size(nullptr, pool.get(), 0));
  gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_ledger_lookup(&e, pool.get(), 0, nullptr));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_task_count(nullptr, o.graph.get()));

  gf_buffer_desc bd = GF_BUFFER_DESC_INIT;
  bd.size = 8;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_buffer(nullptr, o.graph.get(), &bd));
  gf_data d{0};
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_buffer(&d, o.graph.get(), nullptr));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                   gf_graph_add_host_buffer(&d, o.graph.get(), "h", nullptr, 16, 0));
  gf_task t{0};
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, o.graph.get(), nullptr));

  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                   gf_graph_submit(nullptr, pool.get(), o.graph.get(), nullptr));

  gf_run *raw = submit(pool.get(), o.graph.get());
  ASSERT_NE(raw, nullptr);
  RunPtr run(raw);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_state_get(nullptr, run.get()));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_fd(nullptr, run.get()));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_task_state(nullptr, run.get(), o.task));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_task_error(nullptr, run.get(), o.task));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_task_attempts(nullptr, run.get(), o.task));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_stats_get(nullptr, run.get()));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_fetch(nullptr, run.get(), o.out, nullptr, 0));
}

TEST(AbiErrors, PoolCreateFailureLeavesOutNull) {
  gf_pool *p = reinterpret_cast<gf_pool *>(g_forged);
  gf_pool_config cfg = host_config(1, -1);
  cfg.struct_size = 3;
  GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_pool_create(&p, &cfg));
  EXPECT_EQ(p, nullptr);
}

TEST(AbiErrors, VersionMismatch) {
  gf_pool *p = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_VERSION_MISMATCH,
                                   gf_pool_create_versioned(&p, nullptr, GF_VERSION_MAJOR + 1));
  EXPECT_EQ(p, nullptr);
  EXPECT_FALSE(m.empty());
  // The matching major version works, with the default config.
  gf_pool_config cfg = host_config(1, -1);
  GF_ASSERT_OK(gf_pool_create_versioned(&p, &cfg, GF_VERSION_MAJOR));
  ASSERT_NE(p, nullptr);
  gf_pool_destroy(p);
}

// A struct followed by spare bytes, so that a struct_size larger than the struct is never read
// past the object.
template <class T>
struct Padded {
  T s;
  unsigned char spare[16] = {};
};

template <class T>
std::vector<uint32_t> bad_sizes() {
  return {3u, 0u, static_cast<uint32_t>(sizeof(T) + 8)};
}

TEST(AbiErrors, PoolConfigStructSize) {
  for (uint32_t size : bad_sizes<gf_pool_config>()) {
    Padded<gf_pool_config> c{host_config(1, -1)};
    c.s.struct_size = size;
    gf_pool *p = nullptr;
    std::string m = GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_pool_create(&p, &c.s));
    EXPECT_TRUE(contains(m, "gf_pool_config")) << "size " << size << ": " << m;
    EXPECT_EQ(p, nullptr);
    gf_pool_destroy(p);
  }
}

TEST(AbiErrors, GraphStructSizes) {
  Graph g = make_graph();
  for (uint32_t size : bad_sizes<gf_buffer_desc>()) {
    Padded<gf_buffer_desc> b{GF_BUFFER_DESC_INIT};
    b.s.struct_size = size;
    b.s.size = 8;
    gf_data d{0};
    std::string m = GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_graph_add_buffer(&d, g.get(), &b.s));
    EXPECT_TRUE(contains(m, "gf_buffer_desc")) << "size " << size << ": " << m;
  }
  g_destroyed = 0;
  for (uint32_t size : bad_sizes<gf_task_desc>()) {
    Padded<gf_task_desc> t{GF_TASK_DESC_INIT};
    t.s.struct_size = size;
    t.s.cpu_fn = noop_body;
    t.s.user_data = &g_destroyed;
    t.s.user_data_destroy = count_destroy;
    gf_task out{0};
    std::string m = GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_graph_add_task(&out, g.get(), &t.s));
    EXPECT_TRUE(contains(m, "gf_task_desc")) << "size " << size << ": " << m;
  }
  uint64_t count = 99;
  GF_EXPECT_OK(gf_graph_task_count(&count, g.get()));
  EXPECT_EQ(count, 0u) << "a rejected task was added";
  g.reset();
  EXPECT_EQ(g_destroyed.load(), 0) << "user_data of a rejected task must stay the caller's";
}

TEST(AbiErrors, SubmitOptionsStructSize) {
  Pool pool = make_pool(host_config(1, -1));
  auto ran = std::make_shared<std::atomic<int>>(0);
  Graph g = make_graph();
  TaskSpec s;
  s.name = "t";
  s.cpu = counting_body(ran);
  must_add_task(g.get(), s);
  for (uint32_t size : bad_sizes<gf_submit_options>()) {
    Padded<gf_submit_options> o{GF_SUBMIT_OPTIONS_INIT};
    o.s.struct_size = size;
    gf_run *r = nullptr;
    std::string m =
        GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_graph_submit(&r, pool.get(), g.get(), &o.s));
    EXPECT_TRUE(contains(m, "gf_submit_options")) << "size " << size << ": " << m;
    EXPECT_EQ(r, nullptr);
    gf_run_destroy(r);
  }
  pool.reset();
  EXPECT_EQ(ran->load(), 0);
}

TEST(AbiErrors, OutputStructSizes) {
  Pool pool = make_pool(host_config(1, 1));
  OneTask o = one_task_graph("outsizes");
  RunPtr run(submit(pool.get(), o.graph.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));

  for (uint32_t size : bad_sizes<gf_worker_info>()) {
    Padded<gf_worker_info> w{GF_WORKER_INFO_INIT};
    w.s.struct_size = size;
    std::string m = GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_pool_worker_info(&w.s, pool.get(), 0));
    EXPECT_TRUE(contains(m, "gf_worker_info")) << m;
  }
  for (uint32_t size : bad_sizes<gf_ledger_entry>()) {
    Padded<gf_ledger_entry> e{GF_LEDGER_ENTRY_INIT};
    e.s.struct_size = size;
    std::string m =
        GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_pool_ledger_entry(&e.s, pool.get(), 0, 0));
    EXPECT_TRUE(contains(m, "gf_ledger_entry")) << m;
    m = GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_pool_ledger_lookup(&e.s, pool.get(), 0, "cpu"));
    EXPECT_TRUE(contains(m, "gf_ledger_entry")) << m;
  }
  for (uint32_t size : bad_sizes<gf_run_stats>()) {
    Padded<gf_run_stats> st{GF_RUN_STATS_INIT};
    st.s.struct_size = size;
    std::string m = GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_run_stats_get(&st.s, run.get()));
    EXPECT_TRUE(contains(m, "gf_run_stats")) << m;
  }
}

TEST(AbiErrors, TaskEnvStructSize) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  struct Seen {
    gf_status status[3];
    std::string msg[3];
  };
  auto seen = std::make_shared<Seen>();
  TaskSpec s;
  s.name = "env";
  s.cpu = [seen](gf_task_ctx *ctx) {
    const auto sizes = bad_sizes<gf_task_env>();
    for (size_t i = 0; i < 3; ++i) {
      Padded<gf_task_env> e{GF_TASK_ENV_INIT};
      e.s.struct_size = sizes[i];
      seen->status[i] = gf_task_ctx_env(&e.s, ctx);
      seen->msg[i] = last_error();
    }
    return 0;
  };
  must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(seen->status[i], GF_ERR_STRUCT_SIZE) << i;
    EXPECT_TRUE(contains(seen->msg[i], "gf_task_env")) << seen->msg[i];
  }
}

TEST(AbiErrors, BadResourceAmountsNameTaskAndResource) {
  Graph g = make_graph();
  const double bad[] = {-1.0, -0.0001, std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity()};
  for (double amount : bad) {
    TaskSpec s;
    s.name = "greedy_task";
    s.cpu = [](gf_task_ctx *) { return 0; };
    s.resources = {{"cpu", 1.0}, {"bigmem", amount}};
    gf_task t{0};
    std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, g.get(), s));
    EXPECT_TRUE(contains(m, "greedy_task")) << "amount " << amount << ": " << m;
    EXPECT_TRUE(contains(m, "bigmem")) << "amount " << amount << ": " << m;
  }
  // A null resource name.
  TaskSpec s;
  s.name = "nameless_resource";
  s.cpu = [](gf_task_ctx *) { return 0; };
  s.resources = {{nullptr, 1.0}};
  gf_task t{0};
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, g.get(), s));
  EXPECT_TRUE(contains(m, "nameless_resource")) << m;
  // resource_count without resources.
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = "count_only";
  d.cpu_fn = noop_body;
  d.resource_count = 2;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &d));

  uint64_t count = 99;
  GF_EXPECT_OK(gf_graph_task_count(&count, g.get()));
  EXPECT_EQ(count, 0u);
}

TEST(AbiErrors, TaskWithoutBodyIsRejected) {
  Graph g = make_graph();
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = "bodiless";
  gf_task t{0};
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &d));
  EXPECT_TRUE(contains(m, "bodiless")) << m;
}

TEST(AbiErrors, BadPoolConfigFieldsAreNamed) {
  {
    gf_pool_config c = host_config(1, -1);
    c.emulated_bandwidth = std::numeric_limits<double>::quiet_NaN();
    gf_pool *p = nullptr;
    std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &c));
    EXPECT_TRUE(contains(m, "emulated_bandwidth")) << m;
    EXPECT_EQ(p, nullptr);
    gf_pool_destroy(p);
  }
  {
    gf_pool_config c = host_config(1, -1);
    c.backend = static_cast<gf_backend>(77);
    gf_pool *p = nullptr;
    std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &c));
    EXPECT_TRUE(contains(m, "backend")) << m;
    gf_pool_destroy(p);
  }
  {
    gf_pool_config c = host_config(1, -1);
    c.cpu_worker_labels = nullptr;
    c.cpu_worker_label_count = 1;
    gf_pool *p = nullptr;
    std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &c));
    EXPECT_TRUE(contains(m, "cpu_worker_labels")) << m;
    gf_pool_destroy(p);
  }
  {
    const gf_resource labels[] = {{"bigmem", -2.0}};
    gf_pool_config c = host_config(1, 1);
    c.gpu_worker_labels = labels;
    c.gpu_worker_label_count = 1;
    gf_pool *p = nullptr;
    std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &c));
    EXPECT_TRUE(contains(m, "gpu_worker_labels") || contains(m, "bigmem")) << m;
    gf_pool_destroy(p);
  }
}

TEST(AbiErrors, LastErrorIsPerThreadAndNeverNull) {
  uint32_t n = 0;
  ASSERT_EQ(gf_pool_worker_count(&n, nullptr), GF_ERR_INVALID_HANDLE);
  const std::string mine = last_error();
  EXPECT_FALSE(mine.empty());

  std::string other = "unset";
  bool other_null = true;
  std::thread th([&] {
    const char *m = gf_last_error();
    other_null = (m == nullptr);
    if (m) other = m;
  });
  th.join();
  EXPECT_FALSE(other_null);
  EXPECT_EQ(other, "") << "a fresh thread must see an empty message";
  // This thread's message is unaffected by the other thread.
  EXPECT_EQ(last_error(), mine);

  // A successful call clears it.
  gf_graph *g = nullptr;
  ASSERT_EQ(gf_graph_create(&g), GF_OK);
  ASSERT_NE(gf_last_error(), nullptr);
  EXPECT_STREQ(gf_last_error(), "");
  gf_graph_destroy(g);
}

// Success clears the calling thread's message whatever other threads hold, and however many
// threads have come and gone holding one.
TEST(AbiErrors, SuccessClearsOnlyItsOwnThreadsMessage) {
  uint32_t n = 0;
  for (int i = 0; i < 3; ++i) {  // threads that end while holding a message
    std::thread([&] {
      EXPECT_EQ(gf_pool_worker_count(&n, nullptr), GF_ERR_INVALID_HANDLE);
    }).join();
  }
  ASSERT_EQ(gf_pool_worker_count(&n, nullptr), GF_ERR_INVALID_HANDLE);
  const std::string mine = gf_last_error();
  ASSERT_FALSE(mine.empty());
  std::string failed_there, then_there = "unset";
  std::thread([&] {
    EXPECT_EQ(gf_pool_worker_count(&n, nullptr), GF_ERR_INVALID_HANDLE);
    failed_there = gf_last_error();
    gf_graph *g = nullptr;
    EXPECT_EQ(gf_graph_create(&g), GF_OK);
    then_there = gf_last_error();
    gf_graph_destroy(g);
  }).join();
  EXPECT_FALSE(failed_there.empty());
  EXPECT_EQ(then_there, "");
  EXPECT_EQ(gf_last_error(), mine);  // untouched by the other thread's calls
  gf_graph *g = nullptr;
  ASSERT_EQ(gf_graph_create(&g), GF_OK);
  EXPECT_STREQ(gf_last_error(), "");
  gf_graph_destroy(g);
  for (int i = 0; i < 2; ++i) {  // and again once no thread holds one
    ASSERT_EQ(gf_pool_worker_count(&n, nullptr), GF_ERR_INVALID_HANDLE);
    EXPECT_FALSE(std::string(gf_last_error()).empty());
    ASSERT_EQ(gf_graph_create(&g), GF_OK);
    EXPECT_STREQ(gf_last_error(), "");
    gf_graph_destroy(g);
  }
}

TEST(AbiErrors, ReferencesFromAnotherGraphAreRejected) {
  // Two graphs of identical shape, so that per-graph ids would collide.
  OneTask a = one_task_graph("task_a");
  OneTask b = one_task_graph("task_b");

  TaskSpec s;
  s.name = "uses_foreign_input";
  s.cpu = [](gf_task_ctx *) { return 0; };
  s.inputs = {a.out};
  gf_task t{0};
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, b.graph.get(), s));

  s = TaskSpec{};
  s.name = "uses_foreign_output";
  s.cpu = [](gf_task_ctx *) { return 0; };
  s.outputs = {a.out};
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, b.graph.get(), s));

  s = TaskSpec{};
  s.name = "after_foreign";
  s.cpu = [](gf_task_ctx *) { return 0; };
  s.after = {a.task};
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, b.graph.get(), s));

  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_dependency(b.graph.get(), b.task, a.task));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_dependency(b.graph.get(), a.task, b.task));

  // id 0 is never valid.
  s = TaskSpec{};
  s.name = "zero_ref";
  s.cpu = [](gf_task_ctx *) { return 0; };
  s.inputs = {gf_data{0}};
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, add_task(&t, b.graph.get(), s));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                   gf_graph_add_dependency(b.graph.get(), b.task, gf_task{0}));

  uint64_t count = 0;
  GF_EXPECT_OK(gf_graph_task_count(&count, b.graph.get()));
  EXPECT_EQ(count, 1u);

  // The run of graph b rejects a's references too.
  Pool pool = make_pool(host_config(1, -1));
  RunPtr run(submit(pool.get(), b.graph.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  gf_task_state ts{};
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_task_state(&ts, run.get(), a.task));
  uint64_t size = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_fetch(&size, run.get(), a.out, nullptr, 0));
  // While b's own references work.
  EXPECT_EQ(task_state(run.get(), b.task), GF_TASK_SUCCEEDED);
  GF_EXPECT_OK(gf_run_fetch(&size, run.get(), b.out, nullptr, 0));
  EXPECT_EQ(size, 16u);
}

TEST(AbiErrors, OutOfRangeIndices) {
  Pool pool = make_pool(host_config(2, 1));
  uint32_t n = worker_count(pool.get());
  ASSERT_EQ(n, 3u);
  gf_worker_info wi = GF_WORKER_INFO_INIT;
  gf_status s = gf_pool_worker_info(&wi, pool.get(), n);
  EXPECT_TRUE(s == GF_ERR_INVALID_ARGUMENT || s == GF_ERR_NOT_FOUND) << describe(s);
  uint32_t size = 0;
  s = gf_pool_ledger_size(&size, pool.get(), n);
  EXPECT_TRUE(s == GF_ERR_INVALID_ARGUMENT || s == GF_ERR_NOT_FOUND) << describe(s);
  GF_ASSERT_OK(gf_pool_ledger_size(&size, pool.get(), 0));
  gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
  s = gf_pool_ledger_entry(&e, pool.get(), 0, size);
  EXPECT_TRUE(s == GF_ERR_INVALID_ARGUMENT || s == GF_ERR_NOT_FOUND) << describe(s);
  GF_EXPECT_STATUS(GF_ERR_NOT_FOUND, gf_pool_ledger_lookup(&e, pool.get(), 0, "no_such_resource"));
}

TEST(AbiErrors, TaskContextMisuse) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  const char input_bytes[8] = "abcdefg";
  gf_data in{0};
  GF_ASSERT_OK(gf_graph_add_host_buffer(&in, g.get(), "in", input_bytes, 8, 0));
  gf_data out = must_add_buffer(g.get(), "out", 32);
  struct Seen {
    gf_status input_oob = GF_OK, output_oob = GF_OK, output_null = GF_OK, wrong_size = GF_OK;
  };
  auto seen = std::make_shared<Seen>();
  TaskSpec s;
  s.name = "misuse";
  s.inputs = {in};
  s.outputs = {out};
  s.cpu = [seen](gf_task_ctx *ctx) {
    const void *ip = nullptr;
    uint64_t isz = 0;
    seen->input_oob = gf_task_ctx_input(&ip, &isz, ctx, 1);
    void *op = nullptr;
    seen->output_oob = gf_task_ctx_output(&op, ctx, 1, 32);
    seen->output_null = gf_task_ctx_output(nullptr, ctx, 0, 32);
    seen->wrong_size = gf_task_ctx_output(&op, ctx, 0, 33);
    return write_pattern(ctx, 0, 32, 3) ? 0 : 1;
  };
  must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(seen->input_oob, GF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(seen->output_oob, GF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(seen->output_null, GF_ERR_INVALID_ARGUMENT);
  EXPECT_NE(seen->wrong_size, GF_OK) << "an output size different from the declared one";

  // Fetch with a too small destination.
  unsigned char small[8];
  uint64_t size = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                   gf_run_fetch(&size, run.get(), out, small, sizeof small));
  std::vector<unsigned char> bytes = fetch(run.get(), out);
  ASSERT_EQ(bytes.size(), 32u);
  EXPECT_TRUE(check_pattern(bytes.data(), 32, 3));
}

TEST(AbiErrors, UserDataDestroyedOnceWhenGraphAndRunsAreGone) {
  g_destroyed = 0;
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = "owned";
  d.cpu_fn = noop_body;
  d.user_data = &g_destroyed;
  d.user_data_destroy = count_destroy;
  gf_task t{0};
  GF_ASSERT_OK(gf_graph_add_task(&t, g.get(), &d));
  gf_run *r = submit(pool.get(), g.get());
  ASSERT_NE(r, nullptr);
  GF_ASSERT_OK(gf_run_wait(r, kWaitMs));
  g.reset();
  EXPECT_EQ(g_destroyed.load(), 0) << "destroyed while a run of the graph is alive";
  gf_run_destroy(r);
  EXPECT_TRUE(wait_until([] { return g_destroyed.load() >= 1; }, 5000ms));
  EXPECT_EQ(g_destroyed.load(), 1);
}

}  // namespace
