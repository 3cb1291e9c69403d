// Mixed graphs (issue 13, item 3): one graph holding C callbacks that run in this process and
// kernels only the service loaded (`gpuflow serve --plugin seed_kernels.so`) runs split between
// the two (GF_RUN_SPLIT), its buffers moving over the data plane as the graph dictates. A real
// `gpuflow serve` process; this test process is the client, through the C ABI only.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "processes.hpp"
#include "test_support.hpp"

using namespace gfsvc;

namespace {

std::string error_text() {
  const char *m = gf_last_error();
  return m ? m : "";
}

#define OK(expr) ASSERT_EQ((expr), GF_OK) << #expr << ": " << error_text()

// In this process: the text "ROW0 COL0 ROWS COLS SEED" seed.chunk reads.
int write_params(gf_task_ctx *ctx, void *) {
  const char text[] = "0 0 4 4 42";
  void *out = nullptr;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof text - 1) != GF_OK) return 1;
  std::memcpy(out, text, sizeof text - 1);
  return 0;
}

// In this process: twice the double it reads.
int twice(gf_task_ctx *ctx, void *) {
  const void *in = nullptr;
  uint64_t size = 0;
  void *out = nullptr;
  if (gf_task_ctx_input(&in, &size, ctx, 0) != GF_OK || size != sizeof(double) ||
      gf_task_ctx_output(&out, ctx, 0, sizeof(double)) != GF_OK) {
    gf_task_ctx_fail(ctx, "twice: wants one 8-byte double");
    return 1;
  }
  double v;
  std::memcpy(&v, in, sizeof v);
  v *= 2;
  std::memcpy(out, &v, sizeof v);
  return 0;
}

int fails(gf_task_ctx *ctx, void *) {
  gf_task_ctx_fail(ctx, "fails: on purpose");
  return 1;
}

std::atomic<bool> release_waiter{false};
int waits(gf_task_ctx *ctx, void *) {
  while (!release_waiter.load() && !gf_task_ctx_cancelled(ctx)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return write_params(ctx, nullptr);
}

int set_value(gf_task_ctx *ctx, void *) {
  static int value = 7;
  return gf_task_ctx_set_value(ctx, 0, &value, nullptr, sizeof value) == GF_OK ? 0 : 1;
}

struct Handles {
  gf_pool *pool = nullptr;
  gf_graph *graph = nullptr;
  gf_run *run = nullptr;
  ~Handles() {
    gf_run_destroy(run);
    gf_graph_destroy(graph);
    gf_pool_destroy(pool);
  }
};

class SplitRunTest : public ::testing::Test {
 protected:
  TempDir dir;
  Service service{dir, 1, {"--plugin", SEED_KERNELS_PATH}};

  gf_pool *connected_pool() {
    gf_pool_config c = GF_POOL_CONFIG_INIT;
    const std::string endpoint = service.endpoint();
    c.endpoint = endpoint.c_str();
    c.cpu_workers = 2;
    gf_pool *pool = nullptr;
    EXPECT_EQ(gf_pool_create(&pool, &c), GF_OK) << error_text();
    return pool;
  }

  static gf_task task(gf_graph *g, const char *name, gf_task_fn fn, const char *kernel,
                      std::vector<gf_data> in, std::vector<gf_data> out) {
    gf_task_desc d = GF_TASK_DESC_INIT;
    d.name = name;
    d.cpu_fn = fn;
    d.kernel = kernel;
    d.inputs = in.data();
    d.input_count = static_cast<uint32_t>(in.size());
    d.outputs = out.data();
    d.output_count = static_cast<uint32_t>(out.size());
    gf_task t{};
    EXPECT_EQ(gf_graph_add_task(&t, g, &d), GF_OK) << error_text();
    return t;
  }

  // params (here) -> seed.chunk (service) -> twice (here); returns the kept result's data.
  static gf_data pipeline(gf_graph *g, gf_task_fn first = write_params) {
    gf_data params = gft::must_add_buffer(g, "params", 0);
    gf_data partial = gft::must_add_buffer(g, "partial", 8);
    gf_data result = gft::must_add_buffer(g, "result", 8, GF_DATA_KEEP);
    task(g, "params", first, nullptr, {}, {params});
    task(g, "chunk", nullptr, "seed.chunk", {params}, {partial});
    task(g, "twice", twice, nullptr, {partial}, {result});
    return result;
  }
};

TEST_F(SplitRunTest, InProcessThenServiceKernelThenInProcess) {
  ASSERT_TRUE(service.ready()) << service.log();
  // The expected value: seed.chunk run in this process on an embedded pool, doubled.
  double expected = 0;
  {
    Handles h;
    gf_pool_config c = GF_POOL_CONFIG_INIT;
    c.endpoint = "embedded";
    c.cpu_workers = 2;
    OK(gf_pool_create(&h.pool, &c));
    OK(gf_pool_load_plugin(h.pool, SEED_KERNELS_PATH));
    OK(gf_graph_create(&h.graph));
    gf_data result = pipeline(h.graph);
    OK(gf_graph_submit(&h.run, h.pool, h.graph, nullptr));
    OK(gf_run_wait(h.run, 60000));
    uint64_t size = 0;
    OK(gf_run_fetch(&size, h.run, result, &expected, sizeof expected));
    ASSERT_GT(expected, 0);
  }
  Handles h;
  h.pool = connected_pool();
  ASSERT_NE(h.pool, nullptr);
  OK(gf_graph_create(&h.graph));
  gf_data result = pipeline(h.graph);
  OK(gf_graph_submit(&h.run, h.pool, h.graph, nullptr));
  gf_run_where where = GF_RUN_ANYWHERE;
  OK(gf_run_where_get(&where, h.run));
  EXPECT_EQ(where, GF_RUN_SPLIT);
  OK(gf_run_wait(h.run, 60000 * kTimeFactor));
  double got = 0;
  uint64_t size = 0;
  OK(gf_run_fetch(&size, h.run, result, &got, sizeof got));
  EXPECT_EQ(size, sizeof got);
  EXPECT_EQ(got, expected);
  gf_run_stats stats = GF_RUN_STATS_INIT;
  OK(gf_run_stats_get(&stats, h.run));
  EXPECT_EQ(stats.tasks, 3u);
  EXPECT_EQ(stats.succeeded, 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    gf_task t{};
    gf_task_state state{};
    OK(gf_graph_task_at(&t, h.graph, i));
    OK(gf_run_task_state(&state, h.run, t));
    EXPECT_EQ(state, GF_TASK_SUCCEEDED) << "task " << i;
  }
  // The middle task ran in the service, in this client's name.
  EXPECT_TRUE(contains(service.log(), "(graph)")) << service.log();
  // Its part held nothing for the caller to read (its output was read back for the last step),
  // so it was let go at once: no blob of it stays on the service while the run is kept.
  auto blob_bytes = [&] {
    gf_bytes status{};
    if (gf_pool_service_status(&status, h.pool, GF_STATUS_JSON) != GF_OK) return std::string("?");
    const std::string json(static_cast<const char *>(status.data), status.size);
    gf_bytes_free(&status);
    const size_t at = json.find("\"blob_bytes\":");
    return at == std::string::npos ? json : json.substr(at, json.find_first_of(",}", at) - at);
  };
  std::string seen;
  for (int i = 0; i < 200 && (seen = blob_bytes()) != "\"blob_bytes\":0"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(seen, "\"blob_bytes\":0");
  gf_task chunk{};
  gf_task_state chunk_state{};
  OK(gf_graph_task_at(&chunk, h.graph, 1));
  OK(gf_run_task_state(&chunk_state, h.run, chunk));
  EXPECT_EQ(chunk_state, GF_TASK_SUCCEEDED) << "what a let-go part did is kept";
}

TEST_F(SplitRunTest, AFailureHereKeepsTheServiceTaskFromRunning) {
  ASSERT_TRUE(service.ready()) << service.log();
  Handles h;
  h.pool = connected_pool();
  ASSERT_NE(h.pool, nullptr);
  OK(gf_graph_create(&h.graph));
  gf_data result = pipeline(h.graph, fails);
  gf_data lone = gft::must_add_buffer(h.graph, "lone", 0, GF_DATA_KEEP);
  task(h.graph, "independent", write_params, nullptr, {}, {lone});
  OK(gf_graph_submit(&h.run, h.pool, h.graph, nullptr));
  EXPECT_EQ(gf_run_wait(h.run, 60000 * kTimeFactor), GF_ERR_TASK_FAILED);
  EXPECT_TRUE(contains(error_text(), "fails: on purpose")) << error_text();
  gf_run_state state{};
  OK(gf_run_state_get(&state, h.run));
  EXPECT_EQ(state, GF_RUN_FAILED);
  gf_task chunk{}, independent{};
  OK(gf_graph_task_at(&chunk, h.graph, 1));
  OK(gf_graph_task_at(&independent, h.graph, 3));
  gf_task_state chunk_state{}, independent_state{};
  OK(gf_run_task_state(&chunk_state, h.run, chunk));
  OK(gf_run_task_state(&independent_state, h.run, independent));
  EXPECT_EQ(chunk_state, GF_TASK_FAILED);
  EXPECT_EQ(independent_state, GF_TASK_SUCCEEDED);
  const char *why = nullptr;
  OK(gf_run_task_error(&why, h.run, chunk));
  EXPECT_TRUE(contains(why, "task 'params' failed")) << why;
  uint64_t size = 0;
  EXPECT_EQ(gf_run_fetch(&size, h.run, result, nullptr, 0), GF_ERR_STATE);
  OK(gf_run_fetch(&size, h.run, lone, nullptr, 0));
  EXPECT_EQ(size, 10u);
  // Nothing was sent to the service for the chunk: no pool ran a graph there.
  EXPECT_FALSE(contains(service.log(), "(graph)")) << service.log();
}

TEST_F(SplitRunTest, MessagesNumberUnnamedTasksAsTheCallerDid) {
  ASSERT_TRUE(service.ready()) << service.log();
  Handles h;
  h.pool = connected_pool();
  ASSERT_NE(h.pool, nullptr);
  OK(gf_graph_create(&h.graph));
  gf_data params{};
  const char text[] = "0 0 4 4 42";
  OK(gf_graph_add_host_buffer(&params, h.graph, "params", text, sizeof text - 1, 0));
  gf_data partial = gft::must_add_buffer(h.graph, "partial", 8, GF_DATA_KEEP);
  task(h.graph, "chunk", nullptr, "seed.chunk", {params}, {partial});  // task #0, in the service
  task(h.graph, nullptr, fails, nullptr, {}, {});  // task #1 here: the first of its part
  EXPECT_EQ(gf_graph_submit(&h.run, h.pool, h.graph, nullptr), GF_OK) << error_text();
  EXPECT_EQ(gf_run_wait(h.run, 60000 * kTimeFactor), GF_ERR_TASK_FAILED);
  EXPECT_TRUE(contains(error_text(), "task #1 failed")) << error_text();
  double chunk = 0;
  uint64_t size = 0;
  OK(gf_run_fetch(&size, h.run, partial, &chunk, sizeof chunk));
  EXPECT_GT(chunk, 0);
}

TEST_F(SplitRunTest, AnOpaqueValueCannotCrossToTheService) {
  ASSERT_TRUE(service.ready()) << service.log();
  Handles h;
  h.pool = connected_pool();
  ASSERT_NE(h.pool, nullptr);
  OK(gf_graph_create(&h.graph));
  gf_data value{};
  OK(gf_graph_add_value(&value, h.graph, "opaque", 8, 0));
  gf_data partial = gft::must_add_buffer(h.graph, "partial", 8, GF_DATA_KEEP);
  task(h.graph, "make", set_value, nullptr, {}, {value});
  task(h.graph, "chunk", nullptr, "seed.chunk", {value}, {partial});
  EXPECT_EQ(gf_graph_submit(&h.run, h.pool, h.graph, nullptr), GF_ERR_INFEASIBLE);
  EXPECT_TRUE(contains(error_text(), "data 'opaque'")) << error_text();
  EXPECT_EQ(h.run, nullptr);
}

TEST_F(SplitRunTest, CancelStopsTheStepsStillToCome) {
  ASSERT_TRUE(service.ready()) << service.log();
  release_waiter = false;
  Handles h;
  h.pool = connected_pool();
  ASSERT_NE(h.pool, nullptr);
  OK(gf_graph_create(&h.graph));
  pipeline(h.graph, waits);
  std::atomic<int> callbacks{0};
  gf_submit_options o = GF_SUBMIT_OPTIONS_INIT;
  o.on_complete = [](gf_run *, gf_run_state, void *count) {
    static_cast<std::atomic<int> *>(count)->fetch_add(1);
  };
  o.user_data = &callbacks;
  OK(gf_graph_submit(&h.run, h.pool, h.graph, &o));
  EXPECT_EQ(gf_run_wait(h.run, 100), GF_TIMEOUT);
  OK(gf_run_cancel(h.run));
  EXPECT_EQ(gf_run_wait(h.run, 30000 * kTimeFactor), GF_ERR_CANCELLED);
  gf_run_state state{};
  OK(gf_run_state_get(&state, h.run));
  EXPECT_EQ(state, GF_RUN_CANCELLED);
  gf_task twice_task{};
  gf_task_state twice_state{};
  OK(gf_graph_task_at(&twice_task, h.graph, 2));
  OK(gf_run_task_state(&twice_state, h.run, twice_task));
  EXPECT_EQ(twice_state, GF_TASK_CANCELLED);
  EXPECT_EQ(callbacks.load(), 1);
  release_waiter = true;
}

}  // namespace
