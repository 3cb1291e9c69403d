// gpuflow.hpp, the C++ header over the C ABI, black box: RAII handles and moves, errors with
// status and message, callables as task bodies and their lifetimes, exceptions stopped at the C
// boundary, builders read back through the C API, buffers in and out, kernels, and leases from a
// service in this process. Everything runs on the host backend's emulated devices.
#include <gtest/gtest.h>
#include <gpuflow.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace gf = gpuflow;
using namespace std::chrono_literals;

namespace {

gf::Pool host_pool(int32_t cpus = 2, int32_t devices = 2) {
  return gf::Pool(gf::PoolConfig::host(cpus, devices, 64ull << 20));
}

using gft::wait_until;  // the suites' bounded wait: a guard against hangs, not a timing check

// Calls `f` and returns the gpuflow::Error it throws (failing the test if it throws none).
template <class F>
gf::Error error_of(F &&f) {
  try {
    f();
  } catch (const gf::Error &e) {
    return e;
  }
  ADD_FAILURE() << "no gpuflow::Error was thrown";
  return gf::Error(GF_OK, "");
}

// Counts how many live copies of it are destroyed: a moved-from Probe is not live.
struct Probe {
  std::shared_ptr<std::atomic<int>> destroyed;
  bool live = true;
  explicit Probe(std::shared_ptr<std::atomic<int>> d) : destroyed(std::move(d)) {}
  Probe(const Probe &o) : destroyed(o.destroyed), live(o.live) {}
  Probe(Probe &&o) noexcept : destroyed(o.destroyed), live(std::exchange(o.live, false)) {}
  ~Probe() {
    if (live) ++*destroyed;
  }
};

void write_seven(gf::TaskContext &ctx) {
  ctx.output_as<int64_t>(0, 1)[0] = 7;
}

// A fresh directory for a service's socket, removed at the end.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/gf-hpp-test-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() { std::system(("rm -rf " + path).c_str()); }
};

}  // namespace

// ---- RAII and moves ---------------------------------------------------------------------------

TEST(CxxHandles, DefaultAndMovedFromAreEmptyAndSafeToDestroy) {
  gf::Pool empty_pool;
  gf::Run empty_run;
  gf::Lease empty_lease;
  gf::Service empty_service;
  EXPECT_FALSE(empty_pool);
  EXPECT_FALSE(empty_run);
  EXPECT_FALSE(empty_lease);
  EXPECT_FALSE(empty_service);

  gf::Pool pool = host_pool();
  gf_pool *raw = pool.get();
  gf::Pool moved(std::move(pool));
  EXPECT_EQ(pool.get(), nullptr);  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_EQ(moved.get(), raw);
  empty_pool = std::move(moved);
  EXPECT_EQ(empty_pool.get(), raw);
  EXPECT_GT(empty_pool.worker_count(), 0u);

  gf::Graph graph;
  const gf::Data out = graph.add_buffer(gf::Buffer("out").size(8));
  graph.task("seven").cpu(write_seven).outputs({out}).add();
  gf::Graph other(std::move(graph));
  EXPECT_EQ(graph.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  gf::Run run = other.submit(empty_pool);
  gf::Run run2(std::move(run));
  EXPECT_FALSE(run);  // NOLINT(bugprone-use-after-move)
  run2.wait();
  EXPECT_EQ(run2.fetch_one<int64_t>(out), 7);
  empty_run = std::move(run2);
  EXPECT_EQ(empty_run.state(), GF_RUN_SUCCEEDED);
}

TEST(CxxHandles, AnEmptyHandleIsAnInvalidHandleError) {
  gf::Run run;
  const gf::Error e = error_of([&] { run.wait(); });
  EXPECT_EQ(e.status(), GF_ERR_INVALID_HANDLE);
  EXPECT_FALSE(e.message().empty());
  EXPECT_NE(std::string(e.what()).find("GF_ERR_INVALID_HANDLE"), std::string::npos) << e.what();
  EXPECT_EQ(run.status(), GF_ERR_INVALID_HANDLE);  // the non-throwing escape
  gf::Pool pool;
  EXPECT_EQ(error_of([&] { (void)pool.worker_count(); }).status(), GF_ERR_INVALID_HANDLE);
}

// ---- Errors -----------------------------------------------------------------------------------

TEST(CxxErrors, ACycleIsAnInvalidGraphNamingATask) {
  gf::Pool pool = host_pool();
  gf::Graph graph;
  const gf::Task a = graph.task("a").cpu([](gf::TaskContext &) {}).add();
  const gf::Task b = graph.task("b").cpu([](gf::TaskContext &) {}).after({a}).add();
  graph.add_dependency(a, b);
  const gf::Error e = error_of([&] { (void)graph.submit(pool); });
  EXPECT_EQ(e.status(), GF_ERR_INVALID_GRAPH);
  EXPECT_NE(e.message().find("cycle"), std::string::npos) << e.message();
}

TEST(CxxErrors, AnImpossibleRequestIsInfeasibleNamingTheTask) {
  gf::Pool pool = host_pool(1, 1);
  gf::Graph graph;
  graph.task("greedy").cpu([](gf::TaskContext &) {}).resource("GPU", 5).add();
  const gf::Error e = error_of([&] { (void)graph.submit(pool); });
  EXPECT_EQ(e.status(), GF_ERR_INFEASIBLE);
  EXPECT_NE(e.message().find("greedy"), std::string::npos) << e.message();
}

TEST(CxxErrors, ABadDescriptionAddsNothingAndKeepsTheBody) {
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  {
    gf::Graph graph;
    gf::TaskBuilder builder = graph.task("bad");
    builder.cpu([p = Probe(destroyed)](gf::TaskContext &) {}).resource("GPU", -1);
    const gf::Error e = error_of([&] { (void)builder.add(); });
    EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("GPU"), std::string::npos) << e.message();
    EXPECT_EQ(graph.task_count(), 0u);
    EXPECT_EQ(*destroyed, 0);  // still the builder's
  }
  EXPECT_EQ(*destroyed, 1);
}

// ---- Bodies -----------------------------------------------------------------------------------

TEST(CxxBodies, CapturedStateIsDestroyedOnceAfterTheLastRun) {
  gf::Pool pool = host_pool();
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  auto calls = std::make_shared<std::atomic<int>>(0);
  gf::Run first, second;
  gf::Data out{};
  {
    gf::Graph graph;
    out = graph.add_buffer(gf::Buffer("out").size(sizeof(int64_t)));
    graph.task("count")
        .cpu([probe = Probe(destroyed), calls, base = int64_t{40}](gf::TaskContext &ctx) {
          ctx.output_as<int64_t>(0, 1)[0] = base + ++*calls;
        })
        .outputs({out})
        .add();
    first = graph.submit(pool);
    second = graph.submit(pool);
  }  // the graph object is gone; its runs keep the body
  first.wait();
  second.wait();
  EXPECT_EQ(*calls, 2);
  EXPECT_EQ(first.fetch_one<int64_t>(out) + second.fetch_one<int64_t>(out), 41 + 42);
  EXPECT_EQ(*destroyed, 0);
  first = gf::Run();
  EXPECT_EQ(*destroyed, 0);
  second = gf::Run();
  EXPECT_TRUE(wait_until([&] { return destroyed->load() == 1; }));
  EXPECT_EQ(*destroyed, 1);
}

TEST(CxxBodies, ManyTasksShareTheGraphsArena) {
  gf::Pool pool = host_pool();
  gf::Graph graph;
  std::atomic<int64_t> sum{0};
  constexpr int kTasks = 500;  // well past one arena block
  for (int i = 0; i < kTasks; ++i) {
    std::array<int64_t, 4> payload{i, 0, 0, 0};  // a capture bigger than a pointer
    graph.task().cpu([payload, &sum](gf::TaskContext &) { sum += payload[0]; }).add();
  }
  gf::Run run = graph.submit(pool);
  run.wait();
  EXPECT_EQ(sum, int64_t{kTasks} * (kTasks - 1) / 2);
}

TEST(CxxBodies, CaptureLessLambdasFunctionPointersAndBothWorkerKinds) {
  gf::Pool pool = host_pool(1, 1);
  gf::Graph graph;
  const gf::Data a = graph.add_buffer(gf::Buffer("a").size(8));
  const gf::Data b = graph.add_buffer(gf::Buffer("b").size(8));
  const gf::Data c = graph.add_buffer(gf::Buffer("c").size(8));
  const gf::Data d = graph.add_buffer(gf::Buffer("d").size(8));
  graph.task("lambda")
      .cpu([](gf::TaskContext &ctx) { ctx.output_as<int64_t>(0, 1)[0] = 1; })
      .outputs({a})
      .add();
  graph.task("pointer").cpu(&write_seven).outputs({b}).add();
  // Both bodies need state: they share the task's user data through a pair.
  int64_t cpu_value = 100, gpu_value = 200;
  graph.task("either")
      .cpu([cpu_value](gf::TaskContext &ctx) { ctx.output_as<int64_t>(0, 1)[0] = cpu_value; })
      .gpu([gpu_value](gf::TaskContext &ctx) { ctx.output_as<int64_t>(0, 1)[0] = gpu_value; })
      .outputs({c})
      .add();
  // Two function pointers: the same, stored in the arena.
  graph.task("pointers").cpu(write_seven).gpu(write_seven).outputs({d}).add();
  gf::Run run = graph.submit(pool);
  run.wait();
  EXPECT_EQ(run.fetch_one<int64_t>(a), 1);
  EXPECT_EQ(run.fetch_one<int64_t>(b), 7);
  const int64_t either = run.fetch_one<int64_t>(c);
  EXPECT_TRUE(either == 100 || either == 200) << either;
  EXPECT_EQ(run.fetch_one<int64_t>(d), 7);
}

TEST(CxxBodies, AGpuBodyRunsOnAnEmulatedDeviceWithAFractionalRequest) {
  gf::Pool pool = host_pool(1, 1);
  gf::Graph graph;
  const gf::Data out = graph.add_buffer(gf::Buffer("where").size(sizeof(int32_t)));
  const gf::Task t = graph.task("on_gpu")
                         .gpu([](gf::TaskContext &ctx) {
                           const gf_task_env env = ctx.env();
                           if (env.kind != GF_WORKER_GPU) throw std::runtime_error("not on a GPU");
                           ctx.output_as<int32_t>(0, 1)[0] = env.device;
                         })
                         .resources({{"GPU", 0.5}, {"gpu_memory", 1 << 20}})
                         .outputs({out})
                         .add();
  gf::Run run = graph.submit(pool);
  run.wait();
  EXPECT_EQ(run.fetch_one<int32_t>(out), 0);
  EXPECT_EQ(pool.worker(run.task_worker(t)).kind, GF_WORKER_GPU);
}

TEST(CxxBodies, AThrowingBodyFailsItsTaskWithTheMessage) {
  gf::Pool pool = host_pool();
  gf::Graph graph;
  const gf::Task t = graph.task("thrower")
                         .cpu([](gf::TaskContext &) { throw std::runtime_error("no coffee"); })
                         .retries(2)
                         .add();
  const gf::Task odd = graph.task("odd").cpu([](gf::TaskContext &) { throw 42; }).add();
  gf::Run run = graph.submit(pool);
  const gf::Error e = error_of([&] { run.wait(); });
  EXPECT_EQ(e.status(), GF_ERR_TASK_FAILED);
  EXPECT_EQ(run.state(), GF_RUN_FAILED);
  EXPECT_EQ(run.task_state(t), GF_TASK_FAILED);
  EXPECT_NE(run.task_error(t).find("no coffee"), std::string::npos) << run.task_error(t);
  EXPECT_EQ(run.task_attempts(t), 3u);
  EXPECT_NE(run.task_error(odd).find("not a std::exception"), std::string::npos)
      << run.task_error(odd);
}

TEST(CxxBodies, ABodysGpuflowErrorsFailTheTaskNamingTheCall) {
  gf::Pool pool = host_pool();
  gf::Graph graph;
  const gf::Task t =
      graph.task("no_input").cpu([](gf::TaskContext &ctx) { (void)ctx.input(3); }).add();
  gf::Run run = graph.submit(pool);
  EXPECT_EQ(error_of([&] { (void)run.wait_for(30s); }).status(), GF_ERR_TASK_FAILED);
  EXPECT_EQ(run.status(), GF_ERR_TASK_FAILED);
  // The library's message for the refused call, carried by the Error the body threw.
  EXPECT_NE(run.task_error(t).find("GF_ERR_INVALID_ARGUMENT"), std::string::npos)
      << run.task_error(t);
}

// ---- Builders read back through the C API ----------------------------------------------------

TEST(CxxBuilders, DescriptorsAreWhatTheCApiSees) {
  gf::Graph graph;
  gf::Buffer buffer = gf::Buffer("result").size(64).keep();
  const gf_buffer_desc &bd = buffer.desc();
  EXPECT_EQ(bd.struct_size, sizeof(gf_buffer_desc));
  EXPECT_STREQ(bd.name, "result");
  EXPECT_EQ(bd.size, 64u);
  EXPECT_EQ(bd.flags, uint32_t{GF_DATA_KEEP});

  const std::vector<int32_t> params{1, 2, 3};
  const gf::Data in = graph.add_host_buffer("params", std::span<const int32_t>(params));
  const gf::Data out = graph.add_buffer(std::move(buffer));
  const gf::Task first = graph.task("first").kernel("k.one").add();
  gf::TaskBuilder builder = graph.task("chunk-3");
  builder.kernel("k.two")
      .resources({{"GPU", 0.5}, {"bigmem", 2}})
      .inputs({in})
      .outputs({out})
      .after({first})
      .priority(7)
      .retries(2)
      .cost_key("chunk");
  const gf_task_desc &td = builder.desc();
  EXPECT_EQ(td.struct_size, sizeof(gf_task_desc));
  ASSERT_EQ(td.resource_count, 2u);
  EXPECT_STREQ(td.resources[0].name, "GPU");
  EXPECT_EQ(td.resources[0].amount, 0.5);
  EXPECT_EQ(td.input_count, 1u);
  EXPECT_EQ(td.inputs[0].id, in.id);
  EXPECT_EQ(td.after[0].id, first.id);
  EXPECT_EQ(td.priority, 7);
  EXPECT_EQ(td.cpu_fn, nullptr);
  builder.add();
  graph.task("cmd").command(gf::Command({"sh", "-c", "true"}).env("A=1").timeout(5)).add();
  graph.set_metadata("workflow", "hpp");

  EXPECT_EQ(graph.task_count(), 3u);
  EXPECT_EQ(graph.data_count(), 2u);
  EXPECT_EQ(graph.task_at(1).id, graph.task_at(1).id);
  ASSERT_EQ(graph.metadata().size(), 1u);
  EXPECT_EQ(graph.metadata()[0].second, "hpp");

  // What the library holds, written out by it.
  const nlohmann::json doc = nlohmann::json::parse(graph.serialize(GF_GRAPH_FORMAT_JSON));
  const auto &tasks = doc.at("tasks");
  ASSERT_EQ(tasks.size(), 3u);
  const auto &chunk = tasks.at(1);
  EXPECT_EQ(chunk.at("name"), "chunk-3");
  EXPECT_EQ(chunk.at("kernel"), "k.two");
  EXPECT_EQ(chunk.at("priority"), 7);
  EXPECT_EQ(chunk.at("retries"), 2);
  EXPECT_EQ(chunk.at("cost_key"), "chunk");
  ASSERT_EQ(chunk.at("resources").size(), 2u);
  EXPECT_EQ(chunk.at("resources")[0].at("name"), "GPU");
  EXPECT_EQ(chunk.at("resources")[0].at("amount"), 0.5);
  EXPECT_EQ(chunk.at("resources")[1].at("name"), "bigmem");
  EXPECT_EQ(chunk.at("inputs"), nlohmann::json::array({0}));
  EXPECT_EQ(chunk.at("outputs"), nlohmann::json::array({1}));
  EXPECT_EQ(chunk.at("after"), nlohmann::json::array({0}));
  EXPECT_EQ(tasks.at(2).at("command").at("argv"), nlohmann::json::array({"sh", "-c", "true"}));
  const auto &data = doc.at("data");
  EXPECT_EQ(data.at(1).at("name"), "result");
  EXPECT_EQ(data.at(1).at("size"), 64);
  EXPECT_EQ(data.at(1).at("keep"), true);

  // And read back into a graph of its own.
  gf::Graph copy = gf::Graph::deserialize(graph.serialize(GF_GRAPH_FORMAT_BINARY));
  EXPECT_EQ(copy.task_count(), 3u);
}

TEST(CxxBuilders, AGraphWithACppBodyCannotBeWritten) {
  gf::Graph graph;
  graph.task("cpp").cpu([](gf::TaskContext &) {}).add();
  const gf::Error e = error_of([&] { (void)graph.serialize(); });
  EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT);
  EXPECT_NE(e.message().find("cpp"), std::string::npos) << e.message();
}

TEST(CxxBuilders, ATaskBuilderAddsOnce) {
  gf::Graph graph;
  gf::TaskBuilder builder = graph.task("once");
  builder.cpu([](gf::TaskContext &) {});
  builder.add();
  EXPECT_EQ(error_of([&] { (void)builder.add(); }).status(), GF_ERR_STATE);
}

// ---- Buffers in and out -----------------------------------------------------------------------

TEST(CxxBuffers, HostInputToKeptOutput) {
  gf::Pool pool = host_pool();
  gf::Graph graph;
  std::vector<int32_t> values(1000);
  std::iota(values.begin(), values.end(), 1);
  const gf::Data in = graph.add_host_buffer("values", std::span<const int32_t>(values));
  const gf::Data doubled = graph.add_buffer(gf::Buffer("doubled").size(values.size() * 4).keep());
  const gf::Data sum = graph.add_buffer(gf::Buffer("sum"));  // sized by its producer
  graph.task("double")
      .cpu([](gf::TaskContext &ctx) {
        const auto in_values = ctx.input_as<int32_t>(0);
        const auto out = ctx.output_as<int32_t>(0, in_values.size());
        for (size_t i = 0; i < in_values.size(); ++i) out[i] = 2 * in_values[i];
      })
      .inputs({in})
      .outputs({doubled})
      .add();
  graph.task("sum")
      .cpu([](gf::TaskContext &ctx) {
        const auto v = ctx.input_as<int32_t>(0);
        ctx.output_as<int64_t>(0, 1)[0] = std::accumulate(v.begin(), v.end(), int64_t{0});
      })
      .inputs({doubled})
      .outputs({sum})
      .add();
  gf::Run run = graph.submit(pool);
  run.wait();
  EXPECT_EQ(run.fetch_one<int64_t>(sum), 1000 * 1001);
  const std::vector<int32_t> back = run.fetch<int32_t>(doubled);
  ASSERT_EQ(back.size(), values.size());
  EXPECT_EQ(back[999], 2000);
  EXPECT_EQ(error_of([&] { (void)run.fetch_one<int32_t>(sum); }).status(), GF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(run.stats().succeeded, 2u);
}

// ---- Kernels ----------------------------------------------------------------------------------

TEST(CxxKernels, ACallableRegisteredAsAKernelRunsNamedTasks) {
  gf::Pool pool = host_pool();
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  pool.register_kernel("cxx.nine", [p = Probe(destroyed)](gf::TaskContext &ctx) {
    ctx.output_as<int64_t>(0, 1)[0] = 9;
  });
  EXPECT_EQ(pool.kernel_names(), std::vector<std::string>{"cxx.nine"});
  EXPECT_EQ(error_of([&] { pool.register_kernel("cxx.nine", write_seven); }).status(),
            GF_ERR_INVALID_ARGUMENT);
  gf::Graph graph;
  const gf::Data out = graph.add_buffer(gf::Buffer("out").size(8));
  graph.task("nine").kernel("cxx.nine").outputs({out}).add();
  gf::Run run = graph.submit(pool);
  run.wait();
  EXPECT_EQ(run.fetch_one<int64_t>(out), 9);
  run = gf::Run();
  pool = gf::Pool();
  EXPECT_TRUE(wait_until([&] { return destroyed->load() == 1; }));
}

// ---- Leases and connected pools ---------------------------------------------------------------

TEST(CxxService, LeasesOfEmulatedDevicesThroughAConnectedPool) {
  TempDir dir;
  std::atomic<int> log_lines{0};
  gf::Service service(gf::ServiceConfig()
                          .pool(gf::PoolConfig::host(2, 2, 64ull << 20))
                          .socket_path(dir.path + "/s.sock")
                          .log([&](std::string_view) { ++log_lines; }));
  ASSERT_TRUE(service);
  EXPECT_EQ(service.endpoint().rfind("unix://", 0), 0u) << service.endpoint();
  EXPECT_FALSE(service.remote_endpoint());

  gf::Pool pool = gf::Pool::connect(service.endpoint(), {}, gf::PoolConfig().cpu_workers(1));
  {
    gf::Lease half = pool.acquire_lease(gf::LeaseRequest().gpus(0.5).name("hpp-half"));
    ASSERT_TRUE(half);
    EXPECT_GT(half.id(), 0u);
    ASSERT_EQ(half.device_count(), 1u);
    const gf::LeaseDevice device = half.device(0);
    EXPECT_EQ(device.share, 0.5);
    EXPECT_EQ(device.memory, 32ull << 20);
    EXPECT_EQ(device.uuid.rfind("GPU-", 0), 0u) << device.uuid;
    EXPECT_NE(half.environment().find("CUDA_VISIBLE_DEVICES="), std::string::npos);
    EXPECT_FALSE(half.revoked());
    EXPECT_NE(pool.service_status().find("hpp-half"), std::string::npos);

    // Both devices whole cannot be had while half of one is held: asking once times out.
    EXPECT_FALSE(pool.acquire_lease(gf::LeaseRequest().gpus(2), 0ms).has_value());
    const gf::Error e = error_of([&] { (void)pool.acquire_lease(gf::LeaseRequest().gpus(3)); });
    EXPECT_EQ(e.status(), GF_ERR_INFEASIBLE);
    EXPECT_FALSE(e.message().empty());

    gf::Lease moved = std::move(half);
    EXPECT_FALSE(half);  // NOLINT(bugprone-use-after-move)
    moved.release();
    EXPECT_FALSE(moved);
  }
  std::optional<gf::Lease> both = pool.acquire_lease(gf::LeaseRequest().gpus(2), 20s);
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->devices().size(), 2u);
  both.reset();  // released by its destructor

  // The connected pool runs graphs on this process's CPU workers.
  gf::Graph graph;
  const gf::Data out = graph.add_buffer(gf::Buffer("out").size(8));
  graph.task("seven").cpu(write_seven).outputs({out}).add();
  gf::Run run = graph.submit(pool);
  run.wait();
  EXPECT_EQ(run.fetch_one<int64_t>(out), 7);
  EXPECT_EQ(run.where(), GF_RUN_IN_PROCESS);
  run = gf::Run();
  pool = gf::Pool();
  EXPECT_GT(log_lines.load(), 0);
  service.stop();
  EXPECT_FALSE(service);
}

TEST(CxxService, AnEmbeddedPoolHasNoLeases) {
  gf::Pool pool = host_pool(1, 1);
  const gf::Error e = error_of([&] { (void)pool.acquire_lease(gf::LeaseRequest().gpus(1)); });
  EXPECT_EQ(e.status(), GF_ERR_STATE);
}
