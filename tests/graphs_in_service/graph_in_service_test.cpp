// Graphs that run inside the service (issue 13, item 2) against a real `gpuflow serve` process
// that loaded the test kernel plugin (test_kernels.c documents its kernels). The test process is
// a client through the public C ABI, exactly as an application is; the gpuflow command, and this
// test binary started again in a child mode (GIS_CHILD, below), are clients that can be killed.
// What is checked is what a user relies on: where a graph runs (gf_run_where) follows the kernels
// each side has and refusals say why; results, failures, per-task reports and statistics come
// back as they would from an in-process run; cancel is prompt and the completion callback fires
// once and may fetch; commands start in the client's directory; a client that dies leaves no
// lease and no blob behind; a service that dies fails the run naming it; two clients run at once.
//
// libgpuflow and the public ABI only; GraphSubmit messages no C ABI call would send are
// graph_in_service_wire_test.cpp's.
//
// Waits are for conditions, with deadlines scaled by GPUFLOW_TEST_TIME_FACTOR; the work done is
// bounded by counts.
#include <nlohmann/json.hpp>

#include "graph_in_service_support.hpp"
#include "test_support.hpp"

using namespace gfsvc;
using namespace gis;
using gft::last_error;
using gft::Pool;
using gft::run_stats;
using gft::task_error;
using gft::task_state;
using RunHandle = gft::RunPtr;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Byte i of test.big's output for `seed`; the same function as test_pattern_byte in
// test_kernels.c.
uint8_t pattern_byte(uint64_t i, uint64_t seed) {
  uint64_t z = (i / 8) + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint8_t>(z >> (8 * (i % 8)));
}

// The first byte of `bytes` that is not test.big's pattern, or "" when all are.
std::string pattern_mismatch(const std::vector<uint8_t> &bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != pattern_byte(i, seed)) return "byte " + std::to_string(i) + " differs";
  }
  return {};
}

template <class Done>
bool wait_for(Done done, int timeout_ms) {
  const int64_t start = now_ns();
  for (;;) {
    if (done()) return true;
    if (ms_since(start) > timeout_ms) return false;
    ::usleep(5000);
  }
}

bool exists(const std::string &path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::string read_text(const std::string &path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void write_text(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
}

// A pool connected to the service at `endpoint`; null (with *error set) when that fails.
Pool connect(const std::string &endpoint, std::string *error = nullptr) {
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.backend = GF_BACKEND_HOST;
  c.endpoint = endpoint.c_str();
  c.dashboard = "off";
  gf_pool *p = nullptr;
  if (gf_pool_create(&p, &c) != GF_OK && error) *error = last_error();
  return Pool(p);
}

// Submits `graph` asking for `where`; *status says how submit went, the run is null when it
// failed (then *error is gf_last_error()).
RunHandle submit(gf_pool *pool, gf_graph *graph, gf_run_where where, gf_status *status = nullptr,
                 std::string *error = nullptr, gf_run_callback on_complete = nullptr,
                 void *user_data = nullptr) {
  gf_submit_options o = GF_SUBMIT_OPTIONS_INIT;
  o.where = where;
  o.on_complete = on_complete;
  o.user_data = user_data;
  gf_run *run = reinterpret_cast<gf_run *>(uintptr_t{1});  // submit must clear it on failure
  const gf_status s = gf_graph_submit(&run, pool, graph, &o);
  if (status) *status = s;
  if (s != GF_OK) {
    if (error) *error = last_error();
    EXPECT_EQ(run, nullptr) << "a failed submit must leave *out NULL";
    return RunHandle(nullptr);
  }
  return RunHandle(run);
}

gf_run_where where_of(gf_run *run) {
  gf_run_where w = GF_RUN_ANYWHERE;
  EXPECT_EQ(gf_run_where_get(&w, run), GF_OK) << last_error();
  return w;
}

// The int64 in kept buffer `d`; INT64_MIN (and a failure) when it cannot be fetched.
int64_t fetch_i64(gf_run *run, gf_data d) {
  int64_t v = INT64_MIN;
  uint64_t size = 0;
  EXPECT_EQ(gf_run_fetch(&size, run, d, &v, sizeof v), GF_OK) << last_error();
  EXPECT_EQ(size, sizeof v);
  return v;
}

// ---- Child mode: this binary started again as a client the tests can kill ----
//
// GIS_CHILD=hold: connects to GIS_ENDPOINT, runs a graph in the service whose 4 MiB output stays
// kept there (the run is never destroyed), then starts a 60 s test.wait in the service that
// creates GIS_STARTED, prints "running" and waits for it.
int hold_child() {
  const char *endpoint = std::getenv("GIS_ENDPOINT");
  const char *started = std::getenv("GIS_STARTED");
  if (!endpoint || !started) return 2;
  std::string error;
  Pool pool = connect(endpoint, &error);
  if (!pool) {
    std::fprintf(stderr, "hold: %s\n", error.c_str());
    return 2;
  }
  GraphBuilder kept;
  kept.kernel("big", "test.big", {kept.text("params", std::to_string(4 * kMiB) + " 3")},
              {kept.buffer("out", 4 * kMiB)});
  GraphBuilder waiting;
  waiting.kernel("wait", "test.wait", {waiting.text("params", std::string("60000 ") + started)},
                 {waiting.buffer("waited", 8)});
  if (!kept.error().empty() || !waiting.error().empty()) {
    std::fprintf(stderr, "hold: %s%s\n", kept.error().c_str(), waiting.error().c_str());
    return 2;
  }
  gf_run *first = nullptr, *second = nullptr;
  gf_submit_options o = GF_SUBMIT_OPTIONS_INIT;
  o.where = GF_RUN_IN_SERVICE;
  if (gf_graph_submit(&first, pool.get(), kept.get(), &o) != GF_OK ||
      gf_run_wait(first, -1) != GF_OK ||
      gf_graph_submit(&second, pool.get(), waiting.get(), &o) != GF_OK) {
    std::fprintf(stderr, "hold: %s\n", gf_last_error());
    return 3;
  }
  std::printf("running\n");
  std::fflush(stdout);
  gf_run_wait(second, -1);
  return 0;
}

[[maybe_unused]] const bool kChild = [] {
  if (const char *mode = std::getenv("GIS_CHILD")) {
    std::_Exit(std::string(mode) == "hold" ? hold_child() : 2);
  }
  return false;
}();

std::string self_path() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return {};
  path[n] = '\0';
  return path;
}

// ---- The service's own view (gf_pool_service_status) ----

nlohmann::json service_status(gf_pool *pool) {
  gf_bytes out{};
  if (gf_pool_service_status(&out, pool, GF_STATUS_JSON) != GF_OK) {
    ADD_FAILURE() << "gf_pool_service_status: " << last_error();
    return nlohmann::json::object();
  }
  nlohmann::json doc = nlohmann::json::parse(static_cast<const char *>(out.data),
                                             static_cast<const char *>(out.data) + out.size);
  gf_bytes_free(&out);
  return doc;
}

uint64_t blob_bytes(gf_pool *pool) {
  return service_status(pool).value("blob_bytes", ~uint64_t{0});
}

// Leases held now by process `pid` (every process when pid is 0).
size_t leases_of(const nlohmann::json &status, uint32_t pid = 0) {
  size_t n = 0;
  for (const auto &lease : status.value("leases", nlohmann::json::array())) {
    n += pid == 0 || lease.value("pid", 0u) == pid;
  }
  return n;
}

uint64_t client_blob_bytes(const nlohmann::json &status, uint32_t pid) {
  uint64_t n = 0;
  for (const auto &c : status.value("clients", nlohmann::json::array())) {
    if (c.value("pid", 0u) == pid) n += c.value("blob_bytes", uint64_t{0});
  }
  return n;
}

// The line of the service's log that says client `pid` disconnected ("" when none yet).
std::string disconnect_line(const std::string &log, pid_t pid) {
  std::istringstream in(log);
  const std::string who = "(pid " + std::to_string(pid) + ", ";
  for (std::string line; std::getline(in, line);) {
    if (contains(line, who) && contains(line, " disconnected")) return line;
  }
  return {};
}

// The line of `text` that starts with `prefix` ("" when none).
std::string line_starting(const std::string &text, const std::string &prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return {};
}

// Restores the working directory when it goes.
class Chdir {
 public:
  explicit Chdir(const std::string &to) {
    char here[PATH_MAX];
    if (::getcwd(here, sizeof here)) previous_ = here;
    std::filesystem::create_directories(to);
    ok_ = ::chdir(to.c_str()) == 0;
  }
  ~Chdir() {
    if (!previous_.empty() && ::chdir(previous_.c_str()) != 0) ADD_FAILURE() << "chdir back";
  }
  Chdir(const Chdir &) = delete;
  Chdir &operator=(const Chdir &) = delete;
  bool ok() const { return ok_; }

 private:
  std::string previous_;
  bool ok_ = false;
};

class GraphInService : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("GPUFLOW_POOL");  // in-process runs of the gpuflow command stay private
    // The service's own default for command logs, inherited by it alone: nothing under /tmp.
    ::setenv("GPUFLOW_LOG_DIR", (dir / "service-logs").c_str(), 1);
    service = std::make_unique<Service>(dir, 2, std::vector<std::string>{"--plugin", kPlugin});
    reaper = std::make_unique<KillWithMe>(service->proc().pid());
    ::unsetenv("GPUFLOW_LOG_DIR");
    ASSERT_TRUE(service->ready()) << service->log();
    pool = connect(service->endpoint(), &pool_error);
    ASSERT_TRUE(pool) << pool_error;
  }
  void TearDown() override {
    pool.reset();  // before the service goes: it must not see a client vanish mid-test
  }

  const std::string kPlugin = TEST_KERNELS_PATH;
  TempDir dir;
  std::unique_ptr<Service> service;
  std::unique_ptr<KillWithMe> reaper;  // goes before the service does
  std::string pool_error;
  Pool pool;
};

// ---- Results ----

// Kernels of the service's plugin on literal inputs: the run is in the service, kept outputs
// come back byte for byte (16 MiB included), freed ones are refused naming GF_DATA_KEEP, the
// statistics and per-task report are right, and the run's blobs go when the run does.
TEST_F(GraphInService, RunsPluginKernelsThereAndFetchesKeptOutputs) {
  const uint64_t big_size = 16 * kMiB;
  GraphBuilder g;
  const gf_data a = g.i64("a", 20), b = g.i64("b", 22), three = g.i64("three", 3);
  const gf_data sum = g.buffer("sum", 8);                      // consumed, not kept: freed
  const gf_data scaled = g.buffer("scaled", 8, GF_DATA_KEEP);  // consumed and kept
  const gf_data twice = g.buffer("twice", 8);                  // consumed by nothing: kept
  const gf_data big = g.buffer("big", big_size);               // kept
  const gf_data zero = g.buffer("zero", 8);                    // kept
  const gf_data params = g.text("params", std::to_string(big_size) + " 7");
  std::vector<gf_task> tasks = {
      g.kernel("add", "test.add", {a, b}, {sum}),
      g.kernel("scale", "test.scale", {sum, three}, {scaled}),
      g.kernel("twice", "test.add", {scaled, scaled}, {twice}),
      g.kernel("big", "test.big", {params}, {big}),
      g.kernel("noop", "test.noop", {}, {zero}),
  };
  ASSERT_EQ(g.error(), "");

  RunHandle run = submit(pool.get(), g.get(), GF_RUN_ANYWHERE);
  ASSERT_TRUE(run) << last_error();
  EXPECT_EQ(where_of(run.get()), GF_RUN_IN_SERVICE);
  ASSERT_EQ(gf_run_wait(run.get(), 60000 * kTimeFactor), GF_OK) << last_error();
  gf_run_state state = GF_RUN_RUNNING;
  EXPECT_EQ(gf_run_state_get(&state, run.get()), GF_OK);
  EXPECT_EQ(state, GF_RUN_SUCCEEDED);
  // The completion descriptor is readable once the run has finished.
  int fd = -1;
  ASSERT_EQ(gf_run_fd(&fd, run.get()), GF_OK) << last_error();
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 1);

  EXPECT_EQ(fetch_i64(run.get(), scaled), 126);
  EXPECT_EQ(fetch_i64(run.get(), twice), 252);
  EXPECT_EQ(fetch_i64(run.get(), zero), 0);
  EXPECT_EQ(fetch_i64(run.get(), a), 20) << "a literal input reads back too";
  uint64_t size = 0;
  ASSERT_EQ(gf_run_fetch(&size, run.get(), big, nullptr, 0), GF_OK) << last_error();
  EXPECT_EQ(size, big_size);
  std::vector<uint8_t> bytes(big_size);
  ASSERT_EQ(gf_run_fetch(&size, run.get(), big, bytes.data(), bytes.size()), GF_OK) << last_error();
  EXPECT_EQ(pattern_mismatch(bytes, 7), "");
  // Twice gives the same bytes (the blob stays until the run is destroyed).
  std::vector<uint8_t> again(big_size);
  ASSERT_EQ(gf_run_fetch(&size, run.get(), big, again.data(), again.size()), GF_OK) << last_error();
  EXPECT_TRUE(again == bytes);

  int64_t small = 0;
  EXPECT_EQ(gf_run_fetch(&size, run.get(), twice, &small, 4), GF_ERR_INVALID_ARGUMENT)
      << "dst_capacity below the size";
  EXPECT_EQ(gf_run_fetch(&size, run.get(), sum, &small, sizeof small), GF_ERR_STATE);
  EXPECT_TRUE(contains(last_error(), "GF_DATA_KEEP")) << last_error();
  EXPECT_TRUE(contains(last_error(), "'sum'")) << last_error();

  const gf_run_stats s = run_stats(run.get());
  EXPECT_EQ(s.tasks, 5u);
  EXPECT_EQ(s.succeeded, 5u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.cancelled, 0u);
  EXPECT_EQ(s.attempts, 5u);
  EXPECT_GT(s.elapsed_s, 0.0);
  for (gf_task t : tasks) {
    EXPECT_EQ(task_state(run.get(), t), GF_TASK_SUCCEEDED);
    EXPECT_EQ(task_error(run.get(), t), "");
    uint32_t attempts = 0;
    EXPECT_EQ(gf_run_task_attempts(&attempts, run.get(), t), GF_OK) << last_error();
    EXPECT_EQ(attempts, 1u);
  }

  // The kept outputs wait in the service as this client's blobs until the run is destroyed.
  const nlohmann::json held = service_status(pool.get());
  EXPECT_GE(client_blob_bytes(held, static_cast<uint32_t>(::getpid())), big_size + 24)
      << held.dump();
  run.reset();
  uint64_t left = 0;
  EXPECT_TRUE(wait_for([&] { return (left = blob_bytes(pool.get())) == 0; }, 10000 * kTimeFactor))
      << left << " blob bytes left after gf_run_destroy";
}

// An opaque value a kernel produces in the service stays there: gf_run_value refuses it saying
// so, while the run's buffers read back as usual.
TEST_F(GraphInService, OpaqueValuesStayInTheService) {
  GraphBuilder g;
  gf_data v{0};
  ASSERT_EQ(gf_graph_add_value(&v, g.get(), "v", 8, GF_DATA_KEEP), GF_OK) << last_error();
  const gf_data a = g.i64("a", 1);
  const gf_data out = g.buffer("out", 8);
  g.kernel("value", "test.value", {}, {v});
  g.kernel("add", "test.add", {a, a}, {out});
  ASSERT_EQ(g.error(), "");
  RunHandle run = submit(pool.get(), g.get(), GF_RUN_ANYWHERE);
  ASSERT_TRUE(run) << last_error();
  EXPECT_EQ(where_of(run.get()), GF_RUN_IN_SERVICE);
  ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  void *value = nullptr;
  EXPECT_EQ(gf_run_value(&value, run.get(), v), GF_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "'v'")) << last_error();
  EXPECT_TRUE(contains(last_error(), "service")) << last_error();
  EXPECT_EQ(value, nullptr);
  uint64_t size = 0;
  EXPECT_EQ(gf_run_fetch(&size, run.get(), v, nullptr, 0), GF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fetch_i64(run.get(), out), 2);
}

// A frozen graph can be submitted again; each run gets its own results.
TEST_F(GraphInService, AGraphRunsThereAgainAndAgain) {
  GraphBuilder g;
  const gf_data a = g.i64("a", 7);
  const gf_data out = g.buffer("out", 8);
  g.kernel("add", "test.add", {a, a, a}, {out});
  ASSERT_EQ(g.error(), "");
  std::vector<RunHandle> runs;
  for (int i = 0; i < 4; ++i) {
    runs.push_back(submit(pool.get(), g.get(), GF_RUN_IN_SERVICE));
    ASSERT_TRUE(runs.back()) << last_error();
  }
  for (RunHandle &run : runs) {
    ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
    EXPECT_EQ(fetch_i64(run.get(), out), 21);
  }
}

// ---- Where a graph runs ----

// GF_RUN_ANYWHERE goes to the service for a kernel only it has; GF_RUN_IN_PROCESS then fails
// naming the kernel, until this process loads the plugin too; then ANYWHERE stays here and
// IN_SERVICE still goes there, all with the same result.
TEST_F(GraphInService, WhereFollowsTheKernelsEachSideHas) {
  GraphBuilder g;
  const gf_data a = g.i64("a", 4);
  const gf_data out = g.buffer("out", 8);
  g.kernel("add", "test.add", {a, a}, {out});
  ASSERT_EQ(g.error(), "");

  RunHandle there = submit(pool.get(), g.get(), GF_RUN_ANYWHERE);
  ASSERT_TRUE(there) << last_error();
  EXPECT_EQ(where_of(there.get()), GF_RUN_IN_SERVICE);
  ASSERT_EQ(gf_run_wait(there.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  EXPECT_EQ(fetch_i64(there.get(), out), 8);

  gf_status status = GF_OK;
  std::string error;
  EXPECT_FALSE(submit(pool.get(), g.get(), GF_RUN_IN_PROCESS, &status, &error));
  EXPECT_EQ(status, GF_ERR_NOT_FOUND) << error;
  EXPECT_TRUE(contains(error, "test.add")) << error;
  EXPECT_TRUE(contains(error, "'add'")) << error;

  ASSERT_EQ(gf_pool_load_plugin(pool.get(), kPlugin.c_str()), GF_OK) << last_error();
  for (gf_run_where asked : {GF_RUN_IN_PROCESS, GF_RUN_ANYWHERE, GF_RUN_IN_SERVICE}) {
    RunHandle run = submit(pool.get(), g.get(), asked);
    ASSERT_TRUE(run) << "asked " << asked << ": " << last_error();
    EXPECT_EQ(where_of(run.get()),
              asked == GF_RUN_IN_SERVICE ? GF_RUN_IN_SERVICE : GF_RUN_IN_PROCESS)
        << "asked " << asked;
    ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
    EXPECT_EQ(fetch_i64(run.get(), out), 8) << "asked " << asked;
  }
  // A graph of commands only has no kernel that only the service has: it stays here.
  GraphBuilder commands;
  commands.command("true", {"true"}, nullptr, dir / "logs");
  ASSERT_EQ(commands.error(), "");
  RunHandle command = submit(pool.get(), commands.get(), GF_RUN_ANYWHERE);
  ASSERT_TRUE(command) << last_error();
  EXPECT_EQ(where_of(command.get()), GF_RUN_IN_PROCESS);
  EXPECT_EQ(gf_run_wait(command.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  // A value other than the three is refused.
  EXPECT_FALSE(submit(pool.get(), g.get(), static_cast<gf_run_where>(7), &status, &error));
  EXPECT_EQ(status, GF_ERR_INVALID_ARGUMENT) << error;
}

int succeed_here(gf_task_ctx *, void *) {
  return 0;
}

// GF_RUN_IN_SERVICE on what cannot run there is GF_ERR_INFEASIBLE saying why, naming the task,
// kernel or data; nothing is sent, and the pool carries on.
TEST_F(GraphInService, InServiceRefusesWhatCannotRunThereSayingWhy) {
  gf_status status = GF_OK;
  std::string error;
  {
    GraphBuilder g;
    const gf_data a = g.i64("a", 1);
    const gf_data x = g.buffer("x", 8), y = g.buffer("y", 8);
    g.kernel("k", "test.add", {a}, {x});
    g.callback("callback", succeed_here, {x}, {y});
    ASSERT_EQ(g.error(), "");
    EXPECT_FALSE(submit(pool.get(), g.get(), GF_RUN_IN_SERVICE, &status, &error));
    EXPECT_EQ(status, GF_ERR_INFEASIBLE) << error;
    EXPECT_TRUE(contains(error, "task 'callback'")) << error;
    EXPECT_TRUE(contains(error, "C callback")) << error;
  }
  {
    GraphBuilder g;
    const gf_data a = g.i64("a", 1);
    g.kernel("unknown", "other.kernel", {a}, {g.buffer("x", 8)});
    ASSERT_EQ(g.error(), "");
    EXPECT_FALSE(submit(pool.get(), g.get(), GF_RUN_IN_SERVICE, &status, &error));
    EXPECT_EQ(status, GF_ERR_INFEASIBLE) << error;
    EXPECT_TRUE(contains(error, "task 'unknown'")) << error;
    EXPECT_TRUE(contains(error, "'other.kernel'")) << error;
    // Anywhere: the service lacks it too, so it stays here, where it is unknown as well.
    EXPECT_FALSE(submit(pool.get(), g.get(), GF_RUN_ANYWHERE, &status, &error));
    EXPECT_EQ(status, GF_ERR_NOT_FOUND) << error;
    EXPECT_TRUE(contains(error, "other.kernel")) << error;
  }
  {
    GraphBuilder g;
    int object = 5;
    gf_data v{0};
    ASSERT_EQ(gf_graph_add_host_value(&v, g.get(), "opaque", &object, nullptr, 8), GF_OK)
        << last_error();
    g.kernel("k", "test.noop", {v}, {g.buffer("x", 8)});
    ASSERT_EQ(g.error(), "");
    EXPECT_FALSE(submit(pool.get(), g.get(), GF_RUN_IN_SERVICE, &status, &error));
    EXPECT_EQ(status, GF_ERR_INFEASIBLE) << error;
    EXPECT_TRUE(contains(error, "'opaque'")) << error;
  }
  {
    // More than the service's devices can ever offer: refused by the service at submit, as
    // in process, naming the task, and the document sent up is not left behind.
    GraphBuilder g;
    const gf_resource huge{"gpu_memory", 1e13};
    g.kernel("greedy", "test.noop", {}, {g.buffer("x", 8)}, {huge});
    ASSERT_EQ(g.error(), "");
    EXPECT_FALSE(submit(pool.get(), g.get(), GF_RUN_IN_SERVICE, &status, &error));
    EXPECT_EQ(status, GF_ERR_INFEASIBLE) << error;
    EXPECT_TRUE(contains(error, "task 'greedy'")) << error;
    uint64_t left = 0;
    EXPECT_TRUE(wait_for([&] { return (left = blob_bytes(pool.get())) == 0; }, 10000 * kTimeFactor))
        << left << " blob bytes left after a refused submission";
  }
  GraphBuilder good;
  const gf_data a = good.i64("a", 2);
  const gf_data out = good.buffer("out", 8);
  good.kernel("add", "test.add", {a, a}, {out});
  ASSERT_EQ(good.error(), "");
  {
    // An embedded pool has no service to send it to.
    gf_pool_config c = GF_POOL_CONFIG_INIT;
    c.backend = GF_BACKEND_HOST;
    c.endpoint = "embedded";
    c.dashboard = "off";
    c.cpu_workers = 1;
    c.emulated_devices = 1;
    gf_pool *raw = nullptr;
    ASSERT_EQ(gf_pool_create(&raw, &c), GF_OK) << last_error();
    Pool embedded(raw);
    ASSERT_EQ(gf_pool_load_plugin(embedded.get(), kPlugin.c_str()), GF_OK) << last_error();
    EXPECT_FALSE(submit(embedded.get(), good.get(), GF_RUN_IN_SERVICE, &status, &error));
    EXPECT_EQ(status, GF_ERR_INFEASIBLE) << error;
    EXPECT_TRUE(contains(error, "not connected")) << error;
    RunHandle here = submit(embedded.get(), good.get(), GF_RUN_ANYWHERE);
    ASSERT_TRUE(here) << last_error();
    EXPECT_EQ(where_of(here.get()), GF_RUN_IN_PROCESS);
    ASSERT_EQ(gf_run_wait(here.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  }
  // The connected pool is none the worse.
  RunHandle run = submit(pool.get(), good.get(), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(run) << last_error();
  ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  EXPECT_EQ(fetch_i64(run.get(), out), 4);
}

// ---- Failures ----

// What a failed run tells, from the service exactly as from this process: a failing kernel
// (retried once) fails the run, gf_run_wait names the task and the kernel's message, the task
// reports its error and attempts, its downstream task failed, the others succeeded, and
// outputs of the failed branch were never produced.
TEST_F(GraphInService, AFailingKernelFailsTheRunNamingTheTask) {
  GraphBuilder g;
  const gf_data a = g.i64("a", 5);
  const gf_data x = g.buffer("x", 8), y = g.buffer("y", 8), z = g.buffer("z", 8);
  const gf_data w = g.buffer("w", 8, GF_DATA_KEEP);
  const gf_task first = g.kernel("first", "test.add", {a}, {x});
  const gf_task boom = g.kernel("boom", "test.fail", {x}, {y}, {}, 1);
  const gf_task after = g.kernel("after", "test.scale", {y, a}, {z});
  const gf_task independent = g.kernel("independent", "test.add", {a, a}, {w});
  ASSERT_EQ(g.error(), "");

  Pool local = connect(service->endpoint(), &pool_error);  // the reference, in this process
  ASSERT_TRUE(local) << pool_error;
  ASSERT_EQ(gf_pool_load_plugin(local.get(), kPlugin.c_str()), GF_OK) << last_error();
  RunHandle here = submit(local.get(), g.get(), GF_RUN_IN_PROCESS);
  ASSERT_TRUE(here) << last_error();
  ASSERT_EQ(gf_run_wait(here.get(), 30000 * kTimeFactor), GF_ERR_TASK_FAILED) << last_error();
  const std::string here_error = last_error();

  RunHandle run = submit(pool.get(), g.get(), GF_RUN_ANYWHERE);
  ASSERT_TRUE(run) << last_error();
  ASSERT_EQ(where_of(run.get()), GF_RUN_IN_SERVICE);
  ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_ERR_TASK_FAILED) << last_error();
  const std::string error = last_error();
  EXPECT_TRUE(contains(error, "'boom'")) << error;
  EXPECT_TRUE(contains(error, "test.fail: deliberate failure in boom")) << error;
  EXPECT_EQ(error, here_error);
  EXPECT_EQ(gf_run_poll(run.get()), GF_ERR_TASK_FAILED) << "the outcome stays";
  gf_run_state state = GF_RUN_RUNNING;
  EXPECT_EQ(gf_run_state_get(&state, run.get()), GF_OK);
  EXPECT_EQ(state, GF_RUN_FAILED);

  EXPECT_EQ(task_state(run.get(), first), GF_TASK_SUCCEEDED);
  EXPECT_EQ(task_state(run.get(), independent), GF_TASK_SUCCEEDED);
  EXPECT_EQ(task_state(run.get(), boom), GF_TASK_FAILED);
  EXPECT_EQ(task_state(run.get(), after), GF_TASK_FAILED);
  EXPECT_TRUE(contains(task_error(run.get(), boom), "test.fail: deliberate failure in boom"))
      << task_error(run.get(), boom);
  EXPECT_EQ(task_error(run.get(), first), "");
  uint32_t attempts = 0;
  EXPECT_EQ(gf_run_task_attempts(&attempts, run.get(), boom), GF_OK) << last_error();
  EXPECT_EQ(attempts, 2u) << "one retry";
  for (gf_task t : {first, boom, after, independent}) {
    EXPECT_EQ(task_state(run.get(), t), task_state(here.get(), t)) << "task " << t.id;
    EXPECT_EQ(task_error(run.get(), t), task_error(here.get(), t)) << "task " << t.id;
  }
  const gf_run_stats s = run_stats(run.get()), h = run_stats(here.get());
  EXPECT_EQ(s.tasks, 4u);
  EXPECT_EQ(s.succeeded, 2u);
  EXPECT_EQ(s.tasks, h.tasks);
  EXPECT_EQ(s.succeeded, h.succeeded);
  EXPECT_EQ(s.failed, h.failed);
  EXPECT_EQ(s.cancelled, h.cancelled);
  EXPECT_EQ(s.attempts, h.attempts);

  EXPECT_EQ(fetch_i64(run.get(), w), 10) << "the branch that did not fail kept its result";
  int64_t v = 0;
  uint64_t size = 0;
  EXPECT_EQ(gf_run_fetch(&size, run.get(), z, &v, sizeof v), GF_ERR_STATE);
  EXPECT_TRUE(contains(last_error(), "'z'")) << last_error();
}

// ---- Cancel and completion ----

struct Completion {
  std::atomic<int> calls{0};
  std::atomic<bool> done{false};
  gf_task task{0};
  gf_data data{0};
  // What the callback saw, written before `done`.
  gf_run_state state = GF_RUN_RUNNING;
  gf_status task_status = GF_ERR_INTERNAL, fetch_status = GF_ERR_INTERNAL;
  gf_task_state seen_task_state = GF_TASK_WAITING;
  std::vector<uint8_t> fetched;
  bool destroy = false;
};

void on_complete(gf_run *run, gf_run_state state, void *user_data) {
  auto *c = static_cast<Completion *>(user_data);
  c->calls++;
  c->state = state;
  c->task_status = gf_run_task_state(&c->seen_task_state, run, c->task);
  uint64_t size = 0;
  c->fetch_status = gf_run_fetch(&size, run, c->data, nullptr, 0);
  if (c->fetch_status == GF_OK) {
    c->fetched.resize(size);
    c->fetch_status = gf_run_fetch(&size, run, c->data, c->fetched.data(), size);
  }
  if (c->destroy) gf_run_destroy(run);
  c->done = true;
}

// A 60 s kernel cancelled once it runs: the run ends GF_RUN_CANCELLED within seconds, the
// callback fires once (and may query the run from inside), the kernel's output is never produced.
TEST_F(GraphInService, CancelEndsALongRunPromptlyAndTheCallbackFiresOnce) {
  const std::string started = dir / "started";
  GraphBuilder g;
  const gf_data params = g.text("params", "600000 " + started);
  const gf_data waited = g.buffer("waited", 8);
  const gf_task wait = g.kernel("wait", "test.wait", {params}, {waited});
  ASSERT_EQ(g.error(), "");
  Completion seen;
  seen.task = wait;
  seen.data = params;
  RunHandle run =
      submit(pool.get(), g.get(), GF_RUN_ANYWHERE, nullptr, nullptr, on_complete, &seen);
  ASSERT_TRUE(run) << last_error();
  EXPECT_EQ(where_of(run.get()), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(wait_for([&] { return exists(started); }, 20000 * kTimeFactor)) << service->log();

  EXPECT_EQ(gf_run_poll(run.get()), GF_TIMEOUT);
  gf_run_state state = GF_RUN_SUCCEEDED;
  EXPECT_EQ(gf_run_state_get(&state, run.get()), GF_OK);
  EXPECT_EQ(state, GF_RUN_RUNNING);
  EXPECT_EQ(run_stats(run.get()).tasks, 1u);
  uint64_t size = 0;
  EXPECT_EQ(gf_run_fetch(&size, run.get(), waited, nullptr, 0), GF_ERR_STATE) << "not produced yet";
  EXPECT_EQ(seen.calls.load(), 0);

  // The kernel would wait 10 minutes, far past the wait's deadline: the wait's end is the
  // cancellation's.
  ASSERT_EQ(gf_run_cancel(run.get()), GF_OK) << last_error();
  EXPECT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_ERR_CANCELLED) << last_error();
  EXPECT_EQ(gf_run_state_get(&state, run.get()), GF_OK);
  EXPECT_EQ(state, GF_RUN_CANCELLED);
  ASSERT_TRUE(wait_for([&] { return seen.done.load(); }, 10000 * kTimeFactor))
      << "on_complete never finished";
  EXPECT_EQ(seen.state, GF_RUN_CANCELLED);
  EXPECT_EQ(seen.task_status, GF_OK);
  EXPECT_NE(seen.seen_task_state, GF_TASK_SUCCEEDED);
  EXPECT_EQ(seen.fetch_status, GF_OK) << "a literal input reads back from the callback";
  EXPECT_EQ(std::string(seen.fetched.begin(), seen.fetched.end()), "600000 " + started);

  const gf_task_state s = task_state(run.get(), wait);
  EXPECT_TRUE(s == GF_TASK_CANCELLED || s == GF_TASK_FAILED) << s;
  EXPECT_EQ(gf_run_fetch(&size, run.get(), waited, nullptr, 0), GF_ERR_STATE);
  EXPECT_EQ(gf_run_cancel(run.get()), GF_OK) << "cancelling a finished run changes nothing";
  EXPECT_EQ(gf_run_wait(run.get(), 0), GF_ERR_CANCELLED);
  run.reset();
  EXPECT_EQ(seen.calls.load(), 1);
}

// While a graph runs in the service, gf_run_stats shows how far it has got (the service reports
// every 250 ms), as the progress bar of `gpuflow run --pool` needs.
TEST_F(GraphInService, StatsShowProgressWhileTheRunRunsThere) {
  const std::string started = dir / "started", go = dir / "go";
  GraphBuilder g;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "quick" + std::to_string(i);
    g.kernel(name.c_str(), "test.noop", {}, {g.buffer((name + ".out").c_str(), 8)});
  }
  const gf_data waited = g.buffer("waited", 8);
  g.kernel("wait", "test.wait", {g.text("params", "60000 " + started + " " + go)}, {waited});
  ASSERT_EQ(g.error(), "");
  RunHandle run = submit(pool.get(), g.get(), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(run) << last_error();
  ASSERT_TRUE(wait_for([&] { return exists(started); }, 20000 * kTimeFactor)) << service->log();
  gf_run_stats s = GF_RUN_STATS_INIT;
  EXPECT_TRUE(wait_for(
      [&] {
        s = run_stats(run.get());
        return s.succeeded == 3;
      },
      10000 * kTimeFactor))
      << "succeeded " << s.succeeded << " while the run waits";
  EXPECT_EQ(s.tasks, 4u);
  EXPECT_EQ(gf_run_poll(run.get()), GF_TIMEOUT) << "the wait task holds the run open";
  std::ofstream(go).put('x');
  ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  EXPECT_EQ(run_stats(run.get()).succeeded, 4u);
}

// gf_pool_destroy cancels a run in the service as it cancels a local one: the caller's wait
// ends promptly, cancelled, and the handle stays valid until destroyed.
TEST_F(GraphInService, DestroyingThePoolCancelsItsRunInTheService) {
  const std::string started = dir / "started";
  GraphBuilder g;
  const gf_data waited = g.buffer("waited", 8);
  g.kernel("wait", "test.wait", {g.text("params", "600000 " + started)}, {waited});
  ASSERT_EQ(g.error(), "");
  RunHandle run = submit(pool.get(), g.get(), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(run) << last_error();
  ASSERT_TRUE(wait_for([&] { return exists(started); }, 20000 * kTimeFactor)) << service->log();
  pool.reset();  // the kernel would wait 10 minutes, far past the wait's deadline
  EXPECT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_ERR_CANCELLED) << last_error();
  gf_run_state state = GF_RUN_RUNNING;
  EXPECT_EQ(gf_run_state_get(&state, run.get()), GF_OK);
  EXPECT_EQ(state, GF_RUN_CANCELLED);
}

// The completion callback of a run that succeeded fetches its output over the data plane and
// queries its tasks without deadlock, then destroys the run from inside; the run's blobs go.
TEST_F(GraphInService, TheCompletionCallbackMayFetchAndDestroyTheRun) {
  GraphBuilder g;
  const gf_data params = g.text("params", std::to_string(kMiB) + " 11");
  const gf_data out = g.buffer("out", kMiB);
  const gf_task big = g.kernel("big", "test.big", {params}, {out});
  ASSERT_EQ(g.error(), "");
  Completion seen;
  seen.task = big;
  seen.data = out;
  seen.destroy = true;
  gf_status status = GF_OK;
  RunHandle run =
      submit(pool.get(), g.get(), GF_RUN_IN_SERVICE, &status, nullptr, on_complete, &seen);
  ASSERT_TRUE(run) << last_error();
  (void)run.release();  // the callback destroys it
  ASSERT_TRUE(wait_for([&] { return seen.done.load(); }, 30000 * kTimeFactor))
      << "on_complete never finished";
  EXPECT_EQ(seen.calls.load(), 1);
  EXPECT_EQ(seen.state, GF_RUN_SUCCEEDED);
  EXPECT_EQ(seen.task_status, GF_OK);
  EXPECT_EQ(seen.seen_task_state, GF_TASK_SUCCEEDED);
  EXPECT_EQ(seen.fetch_status, GF_OK);
  EXPECT_EQ(seen.fetched.size(), kMiB);
  EXPECT_EQ(pattern_mismatch(seen.fetched, 11), "");
  uint64_t left = 0;
  EXPECT_TRUE(wait_for([&] { return (left = blob_bytes(pool.get())) == 0; }, 10000 * kTimeFactor))
      << left << " blob bytes left after the callback destroyed the run";
}

// Per-task queries are thread-safe: threads asking at once, first thing after the run ended
// (when the report is fetched from the service), all get the tasks' states.
TEST_F(GraphInService, ThreadsQueryTasksAtOnceAfterTheRunEnds) {
  constexpr int kTasks = 32, kThreads = 8, kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    GraphBuilder g;
    const gf_data a = g.i64("a", 1);
    std::vector<gf_task> tasks;
    for (int i = 0; i < kTasks; ++i) {
      const std::string name = "t" + std::to_string(i);
      tasks.push_back(g.kernel(name.c_str(), "test.add", {a}, {g.buffer(nullptr, 8)}));
    }
    ASSERT_EQ(g.error(), "");
    RunHandle run = submit(pool.get(), g.get(), GF_RUN_IN_SERVICE);
    ASSERT_TRUE(run) << last_error();
    ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
    std::atomic<int> ready{0}, wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        ready++;
        while (ready.load() < kThreads) {
        }
        for (gf_task task : tasks) {
          gf_task_state s = GF_TASK_WAITING;
          const char *e = nullptr;
          if (gf_run_task_state(&s, run.get(), task) != GF_OK || s != GF_TASK_SUCCEEDED ||
              gf_run_task_error(&e, run.get(), task) != GF_OK || !e || *e) {
            wrong++;
          }
        }
      });
    }
    for (std::thread &t : threads) t.join();
    EXPECT_EQ(wrong.load(), 0) << "round " << round;
  }
}

// Destroying a run while it runs in the service cancels it there: the leases taken in this
// process's name and the blobs go, and the pool runs the next graph.
TEST_F(GraphInService, DestroyingARunningRunEndsItThere) {
  const std::string started = dir / "started";
  GraphBuilder g;
  g.kernel("wait", "test.wait", {g.text("params", "60000 " + started)}, {g.buffer("w", 8)});
  ASSERT_EQ(g.error(), "");
  RunHandle run = submit(pool.get(), g.get(), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(run) << last_error();
  ASSERT_TRUE(wait_for([&] { return exists(started); }, 20000 * kTimeFactor)) << service->log();
  const uint32_t me = static_cast<uint32_t>(::getpid());
  EXPECT_GE(leases_of(service_status(pool.get()), me), 1u) << "leased in this process's name";
  run.reset();
  nlohmann::json status;
  EXPECT_TRUE(wait_for(
      [&] {
        status = service_status(pool.get());
        return leases_of(status) == 0 && status.value("blob_bytes", 1) == 0;
      },
      10000 * kTimeFactor))
      << "the kernel would wait 60 s; " << status.dump();

  GraphBuilder next;
  const gf_data a = next.i64("a", 3);
  const gf_data out = next.buffer("out", 8);
  next.kernel("add", "test.add", {a, a}, {out});
  ASSERT_EQ(next.error(), "");
  RunHandle again = submit(pool.get(), next.get(), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(again) << last_error();
  ASSERT_EQ(gf_run_wait(again.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  EXPECT_EQ(fetch_i64(again.get(), out), 6);
}

// ---- Commands ----

// A command in the service starts in the client's working directory, as a child of the
// service; a failing one names its exit code.
TEST_F(GraphInService, CommandsRunThereInTheClientsDirectory) {
  Chdir into(dir / "client");
  ASSERT_TRUE(into.ok());
  const std::string here = std::filesystem::canonical(dir / "client").string();
  {
    GraphBuilder g;
    g.command("where", {"sh", "-c", "pwd > out.txt; echo $PPID > ppid.txt"}, nullptr, dir / "logs");
    const gf_data a = g.i64("a", 1);
    g.kernel("add", "test.add", {a}, {g.buffer("x", 8)});
    ASSERT_EQ(g.error(), "");
    RunHandle run = submit(pool.get(), g.get(), GF_RUN_ANYWHERE);
    ASSERT_TRUE(run) << last_error();
    EXPECT_EQ(where_of(run.get()), GF_RUN_IN_SERVICE);
    ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
    EXPECT_EQ(read_text(here + "/out.txt"), here);
    EXPECT_EQ(read_text(here + "/ppid.txt"), std::to_string(service->proc().pid()))
        << "the command is the service's child";
  }
  {
    GraphBuilder g;
    const gf_task fails =
        g.command("fails", {"sh", "-c", "echo about to fail >&2; exit 3"}, nullptr, dir / "logs");
    ASSERT_EQ(g.error(), "");
    RunHandle run = submit(pool.get(), g.get(), GF_RUN_IN_SERVICE);
    ASSERT_TRUE(run) << last_error();
    EXPECT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_ERR_TASK_FAILED);
    EXPECT_TRUE(contains(last_error(), "'fails'")) << last_error();
    EXPECT_EQ(task_state(run.get(), fails), GF_TASK_FAILED);
    const std::string error = task_error(run.get(), fails);
    EXPECT_TRUE(contains(error, "3")) << error;
    EXPECT_TRUE(contains(error, "about to fail")) << error;
  }
}

// A command's relative working and log directories mean the same in the service as in this
// process: relative to the client's working directory (not the service's).
TEST_F(GraphInService, RelativeCommandDirectoriesAreTheClients) {
  Chdir into(dir / "client");
  ASSERT_TRUE(into.ok());
  const std::string client = std::filesystem::canonical(dir / "client").string();
  for (gf_run_where where : {GF_RUN_IN_PROCESS, GF_RUN_IN_SERVICE}) {
    const std::string sub = where == GF_RUN_IN_PROCESS ? "here" : "there";
    std::filesystem::create_directories(client + "/" + sub);
    GraphBuilder g;
    g.command("where", {"sh", "-c", "pwd > out.txt"}, sub.c_str(), "logs-" + sub);
    ASSERT_EQ(g.error(), "");
    RunHandle run = submit(pool.get(), g.get(), where);
    ASSERT_TRUE(run) << last_error();
    EXPECT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << sub << ": " << last_error();
    EXPECT_EQ(read_text(client + "/" + sub + "/out.txt"), client + "/" + sub) << sub;
    EXPECT_TRUE(exists(client + "/logs-" + sub)) << sub << ": the log directory";
  }
}

// ---- The gpuflow command ----

std::string test_document(const std::string &path) {
  GraphBuilder g;
  const gf_data a = g.i64("a", 20), b = g.i64("b", 22), three = g.i64("three", 3);
  const gf_data sum = g.buffer("sum", 8);
  g.kernel("add", "test.add", {a, b}, {sum});
  g.kernel("scale", "test.scale", {sum, three}, {g.buffer("result", 8)});
  write_text(path, g.document(GF_GRAPH_FORMAT_JSON));
  return g.error();
}

// `gpuflow run DOC --pool EP` runs a document of the service's kernels there and prints its
// outputs; --in-process keeps it here (and needs --plugin); a failing run says which task.
TEST_F(GraphInService, TheCommandRunsADocumentThere) {
  const std::string doc = dir / "doc.json";
  ASSERT_EQ(test_document(doc), "");
  const std::string ep = service->endpoint();
  const std::string result = "  result: 8 bytes, int64 126,";
  {
    auto [rc, out] = run_cli(dir, {"run", doc, "--pool", ep, "--show-outputs", "--no-progress"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_TRUE(contains(out, "gpuflow: running in the service at " + ep)) << out;
    EXPECT_TRUE(contains(out, "2 tasks: 2 succeeded, 0 failed")) << out;
    EXPECT_TRUE(contains(out, result)) << out;
  }
  {
    auto [rc, out] =
        run_cli(dir, {"run", doc, "--pool", ep, "--in-service", "--show-outputs", "--no-progress"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_TRUE(contains(out, result)) << out;
  }
  {
    auto [rc, out] = run_cli(dir, {"run", doc, "--pool", ep, "--in-process", "--no-progress"});
    EXPECT_EQ(rc, 2) << out;
    EXPECT_TRUE(contains(out, "test.add")) << out;
  }
  {
    auto [rc, out] = run_cli(dir, {"run", doc, "--pool", ep, "--in-process", "--plugin", kPlugin,
                                   "--show-outputs", "--no-progress"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_FALSE(contains(out, "running in the service")) << out;
    EXPECT_TRUE(contains(out, result)) << out;
  }
  {
    GraphBuilder g;
    const gf_data a = g.i64("a", 1);
    const gf_data x = g.buffer("x", 8);
    g.kernel("first", "test.add", {a}, {x});
    g.kernel("boom", "test.fail", {x}, {g.buffer("y", 8)});
    write_text(dir / "fails.json", g.document(GF_GRAPH_FORMAT_JSON));
    ASSERT_EQ(g.error(), "");
    auto [rc, out] = run_cli(dir, {"run", dir / "fails.json", "--pool", ep, "--no-progress"});
    EXPECT_EQ(rc, 1) << out;
    EXPECT_TRUE(contains(out, "running in the service")) << out;
    EXPECT_TRUE(contains(out, "test.fail: deliberate failure in boom")) << out;
    EXPECT_TRUE(contains(out, "2 tasks: 1 succeeded, 1 failed")) << out;
  }
  {
    GraphBuilder g;
    g.kernel("unknown", "other.kernel", {g.i64("a", 1)}, {g.buffer("x", 8)});
    write_text(dir / "unknown.json", g.document(GF_GRAPH_FORMAT_JSON));
    ASSERT_EQ(g.error(), "");
    auto [rc, out] =
        run_cli(dir, {"run", dir / "unknown.json", "--pool", ep, "--in-service", "--no-progress"});
    EXPECT_EQ(rc, 2) << out;
    EXPECT_TRUE(contains(out, "other.kernel")) << out;
  }
}

// `gpuflow run --log-dir DIR` puts the logs of the graph's commands under DIR, in the service as
// in this process.
TEST_F(GraphInService, TheCommandsLogDirHoldsTheLogsOfCommandsRunThere) {
  GraphBuilder g;
  const std::vector<std::string> argv = {"sh", "-c", "echo hello from the command"};
  std::vector<const char *> args;
  for (const std::string &a : argv) args.push_back(a.c_str());
  gf_command_desc c = GF_COMMAND_DESC_INIT;  // no log_dir of its own
  c.argv = args.data();
  c.argc = static_cast<uint32_t>(args.size());
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = "echoer";
  t.command = &c;
  gf_task echoer{0};
  ASSERT_EQ(gf_graph_add_task(&echoer, g.get(), &t), GF_OK) << last_error();
  g.kernel("add", "test.add", {g.i64("a", 1)}, {g.buffer("x", 8)});
  write_text(dir / "echo.json", g.document(GF_GRAPH_FORMAT_JSON));
  ASSERT_EQ(g.error(), "");
  for (const std::string where : {"--in-process", "--in-service"}) {
    const std::string logs = dir / ("logs" + where);
    auto [rc, out] = run_cli(dir, {"run", dir / "echo.json", "--pool", service->endpoint(), where,
                                   "--plugin", kPlugin, "--log-dir", logs, "--no-progress"});
    EXPECT_EQ(rc, 0) << out;
    std::string found;
    std::error_code ignored;
    for (const auto &e : std::filesystem::recursive_directory_iterator(logs, ignored)) {
      if (e.path().filename() == "echoer.out") found = read_text(e.path().string());
    }
    EXPECT_EQ(found, "hello from the command") << where << ": no echoer.out under " << logs;
  }
}

// The seed example (examples/json/seed.json) in a service that loaded seed_kernels gives the
// result an in-process run gives.
TEST(GraphInServiceSeed, TheSeedExampleGivesTheInProcessResult) {
#ifndef SEED_KERNELS_PATH
  GTEST_SKIP() << "the examples are not built (GPUFLOW_BUILD_EXAMPLES=OFF)";
#else
  ::unsetenv("GPUFLOW_POOL");
  TempDir dir;
  Service service(dir, 2, {"--plugin", SEED_KERNELS_PATH});
  KillWithMe reaper(service.proc().pid());
  ASSERT_TRUE(service.ready()) << service.log();
  auto [rc, there] = run_cli(dir, {"run", SEED_GRAPH_PATH, "--pool", service.endpoint(),
                                   "--show-outputs", "--no-progress"});
  EXPECT_EQ(rc, 0) << there;
  EXPECT_TRUE(contains(there, "running in the service")) << there;
  auto [rc_here, here] =
      run_cli(dir, {"run", SEED_GRAPH_PATH, "--plugin", SEED_KERNELS_PATH, "--backend", "host",
                    "--emulated-devices", "2", "--show-outputs", "--no-progress"});
  EXPECT_EQ(rc_here, 0) << here;
  EXPECT_FALSE(contains(here, "running in the service")) << here;
  const std::string result = line_starting(there, "  result: 8 bytes, int64 ");
  EXPECT_NE(result, "") << there;
  EXPECT_EQ(result, line_starting(here, "  result: 8 bytes, int64 ")) << there << "\n" << here;
  EXPECT_TRUE(contains(there, "32 tasks: 32 succeeded, 0 failed")) << there;
#endif
}

// ---- Clients that die ----

// A 60 s test.wait document, run in the service by `gpuflow run`, which is killed: the service
// logs the disconnect, cancels the run and hands the leases it took in the client's name back
// (long before 60 s), and the next client runs a graph.
TEST_F(GraphInService, AKilledClientsRunEndsAndItsLeasesGoBack) {
  const std::string started = dir / "started", doc = dir / "wait.json";
  {
    GraphBuilder g;
    g.kernel("wait", "test.wait", {g.text("params", "60000 " + started)}, {g.buffer("waited", 8)});
    write_text(doc, g.document(GF_GRAPH_FORMAT_JSON));
    ASSERT_EQ(g.error(), "");
  }
  Proc client({GPUFLOW_CLI_PATH, "run", doc, "--pool", service->endpoint(), "--no-progress"},
              dir / "client.err");
  ASSERT_TRUE(wait_for([&] { return exists(started); }, 20000 * kTimeFactor)) << client.story();
  ASSERT_TRUE(wait_for([&] { return contains(client.stderr_text(), "running in the service"); },
                       10000 * kTimeFactor))
      << client.story();
  const uint32_t pid = static_cast<uint32_t>(client.pid());
  nlohmann::json status = service_status(pool.get());
  EXPECT_GE(leases_of(status, pid), 1u) << "leased in the client's name: " << status.dump();

  client.signal(SIGKILL);
  EXPECT_TRUE(client.wait(5000 * kTimeFactor).has_value());
  EXPECT_TRUE(wait_for([&] { return !disconnect_line(service->log(), client.pid()).empty(); },
                       5000 * kTimeFactor))
      << service->log();
  EXPECT_TRUE(wait_for(
      [&] {
        status = service_status(pool.get());
        return leases_of(status) == 0 && status.value("cpus_in_use", 1.0) == 0 &&
               status.value("blob_bytes", 1) == 0;
      },
      10000 * kTimeFactor))
      << "the kernel would wait 60 s: " << status.dump() << "\n"
      << service->log();

  const std::string next = dir / "next.json";
  ASSERT_EQ(test_document(next), "");
  auto [rc, out] =
      run_cli(dir, {"run", next, "--pool", service->endpoint(), "--show-outputs", "--no-progress"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "  result: 8 bytes, int64 126,")) << out;
}

// A client killed while it holds a finished run's kept outputs in the service (and runs another
// graph there): the service frees those blobs and says so, and the leases go back.
TEST_F(GraphInService, AKilledClientsKeptResultsAreFreed) {
  const std::string started = dir / "started";
  Proc child({self_path()}, dir / "child.err",
             {"GIS_CHILD=hold", "GIS_ENDPOINT=" + service->endpoint(), "GIS_STARTED=" + started});
  ASSERT_NE(child.expect("running", 30000 * kTimeFactor), "") << child.story();
  ASSERT_TRUE(wait_for([&] { return exists(started); }, 20000 * kTimeFactor)) << child.story();
  const uint32_t pid = static_cast<uint32_t>(child.pid());
  nlohmann::json status = service_status(pool.get());
  EXPECT_GE(client_blob_bytes(status, pid), 4 * kMiB) << status.dump();
  EXPECT_GE(leases_of(status, pid), 1u) << status.dump();

  child.signal(SIGKILL);
  EXPECT_TRUE(child.wait(5000 * kTimeFactor).has_value());
  std::string line;
  EXPECT_TRUE(
      wait_for([&] { return !(line = disconnect_line(service->log(), child.pid())).empty(); },
               5000 * kTimeFactor))
      << service->log();
  const std::string freed = "data plane closed, ";
  const size_t at = line.find(freed);
  ASSERT_NE(at, std::string::npos) << line;
  EXPECT_GE(std::stoull(line.substr(at + freed.size())), 4 * kMiB) << line;
  EXPECT_TRUE(wait_for(
      [&] {
        status = service_status(pool.get());
        return leases_of(status) == 0 && status.value("blob_bytes", 1) == 0;
      },
      10000 * kTimeFactor))
      << status.dump() << "\n"
      << service->log();

  GraphBuilder g;
  const gf_data a = g.i64("a", 2);
  const gf_data out = g.buffer("out", 8);
  g.kernel("add", "test.add", {a, a, a}, {out});
  ASSERT_EQ(g.error(), "");
  RunHandle run = submit(pool.get(), g.get(), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(run) << last_error();
  ASSERT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_OK) << last_error();
  EXPECT_EQ(fetch_i64(run.get(), out), 6);
}

// ---- A service that dies ----

// The service killed while a graph runs in it: gf_run_wait returns promptly, the run failed
// naming the service, and its outputs are reported as never produced (not as freed); a new
// submission fails naming the service instead of hanging.
TEST_F(GraphInService, AServiceKilledMidRunFailsTheRunNamingIt) {
  const std::string started = dir / "started";
  GraphBuilder g;
  const gf_data waited = g.buffer("waited", 8);
  g.kernel("wait", "test.wait", {g.text("params", "600000 " + started)}, {waited});
  ASSERT_EQ(g.error(), "");
  RunHandle run = submit(pool.get(), g.get(), GF_RUN_IN_SERVICE);
  ASSERT_TRUE(run) << last_error();
  ASSERT_TRUE(wait_for([&] { return exists(started); }, 20000 * kTimeFactor)) << service->log();
  service->proc().signal(SIGKILL);
  ASSERT_TRUE(service->proc().wait(5000 * kTimeFactor).has_value());

  // The kernel would have waited 10 minutes, far past the wait's deadline.
  EXPECT_EQ(gf_run_wait(run.get(), 30000 * kTimeFactor), GF_ERR_TASK_FAILED) << last_error();
  EXPECT_TRUE(contains(last_error(), service->endpoint())) << last_error();
  gf_run_state state = GF_RUN_RUNNING;
  EXPECT_EQ(gf_run_state_get(&state, run.get()), GF_OK);
  EXPECT_EQ(state, GF_RUN_FAILED);
  uint64_t size = 0;
  EXPECT_EQ(gf_run_fetch(&size, run.get(), waited, nullptr, 0), GF_ERR_STATE);
  const std::string error = last_error();
  EXPECT_FALSE(contains(error, "GF_DATA_KEEP"))
      << "'waited' is kept (no task consumes it); it was never produced: " << error;

  gf_status status = GF_OK;
  std::string why;
  EXPECT_FALSE(submit(pool.get(), g.get(), GF_RUN_IN_SERVICE, &status, &why));  // not a hang
  EXPECT_EQ(status, GF_ERR_SYSTEM) << why;
  EXPECT_TRUE(contains(why, service->endpoint())) << why;
}

// ---- Two clients ----

// Two `gpuflow run` processes whose graphs run in the service at once: each one's test.wait
// waits for the other's to start (so neither finishes unless both run together), and each gets
// its own result.
TEST_F(GraphInService, TwoClientsRunGraphsThereAtOnce) {
  const std::string ep = service->endpoint();
  auto document = [&](const std::string &me, const std::string &other, int64_t k) {
    GraphBuilder g;
    const gf_data key = g.i64("key", k);
    const gf_data params = g.text(
        "params", std::to_string(20000 * kTimeFactor) + " " + (dir / me) + " " + (dir / other));
    const gf_resource cpu{"cpu", 1};
    const gf_task wait = g.kernel("wait", "test.wait", {params}, {g.buffer("waited", 8)}, {cpu});
    const gf_task add = g.kernel("add", "test.add", {key, key}, {g.buffer("result", 8)});
    g.after(add, wait);
    write_text(dir / (me + ".json"), g.document(GF_GRAPH_FORMAT_JSON));
    return g.error();
  };
  ASSERT_EQ(document("a", "b", 100), "");
  ASSERT_EQ(document("b", "a", 200), "");
  Proc a({GPUFLOW_CLI_PATH, "run", dir / "a.json", "--pool", ep, "--show-outputs", "--no-progress"},
         dir / "a.err");
  Proc b({GPUFLOW_CLI_PATH, "run", dir / "b.json", "--pool", ep, "--show-outputs", "--no-progress"},
         dir / "b.err");
  const std::string line_a = a.expect("  result: ", 60000 * kTimeFactor);
  const std::string line_b = b.expect("  result: ", 60000 * kTimeFactor);
  EXPECT_TRUE(contains(line_a, "int64 200,")) << a.story() << service->log();
  EXPECT_TRUE(contains(line_b, "int64 400,")) << b.story() << service->log();
  const std::optional<int> end_a = a.wait(30000 * kTimeFactor);
  const std::optional<int> end_b = b.wait(30000 * kTimeFactor);
  EXPECT_EQ(exit_text(end_a), "exit 0") << a.story();
  EXPECT_EQ(exit_text(end_b), "exit 0") << b.story();
  EXPECT_TRUE(contains(a.stderr_text(), "running in the service")) << a.story();
  EXPECT_TRUE(contains(b.stderr_text(), "running in the service")) << b.story();
}

}  // namespace
