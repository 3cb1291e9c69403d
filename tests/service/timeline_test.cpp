// One timeline for graph tasks and leased jobs (issue 15, item 3): on a node's service, a job
// holding a device through `gpuflow lease` and the tasks of a graph run with `gpuflow run --pool
// --trace` appear on the same device track, and `gpuflow trace --pool` records the leases of
// every process. The traces are read as Chrome trace JSON by a real JSON parser.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "processes.hpp"

using namespace gfsvc;
using nlohmann::json;

namespace {

json read_json(const std::string &path) {
  std::ifstream in(path);
  json doc = json::parse(in, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << path << " is not JSON";
  return doc;
}

// The complete ("X") events of a trace with the given category.
std::vector<json> slices(const json &trace, const std::string &category) {
  std::vector<json> out;
  for (const json &e : trace.at("traceEvents")) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == category) out.push_back(e);
  }
  return out;
}

// The name the trace gives process `pid` (its process_name metadata).
std::string process_name(const json &trace, int pid) {
  for (const json &e : trace.at("traceEvents")) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" &&
        e.value("pid", -1) == pid)
      return e.at("args").value("name", "");
  }
  return "";
}

// Three GPU tasks (commands) that each hold the one device for 50 ms.
void write_gpu_graph(const std::string &path) {
  json tasks = json::array();
  for (int i = 0; i < 3; ++i) {
    tasks.push_back({{"name", "render-" + std::to_string(i)},
                     {"command", {{"argv", {"sleep", "0.05"}}}},
                     {"resources", {{{"name", "GPU"}, {"amount", 1}}}}});
  }
  std::ofstream(path) << json{{"format_version", 1}, {"tasks", tasks}}.dump();
}

}  // namespace

TEST(Timeline, LeasedJobsAndGraphTasksShareTheDeviceTrack) {
  TempDir dir;
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  const std::string graph = dir / "graph.json";
  write_gpu_graph(graph);

  Proc recorder({GPUFLOW_CLI_PATH, "trace", "--pool", service.endpoint(), "--seconds",
                 std::to_string(4 * kTimeFactor), "--output", dir / "node.json"},
                dir / "recorder.err");
  // An external job holds the device first; the graph's tasks wait for it, then run there.
  Proc job({GPUFLOW_CLI_PATH, "lease", "--pool", service.endpoint(), "--gpus", "1", "--name",
            "external-job", "--", "sh", "-c", "echo granted; sleep 0.4"},
           dir / "job.err");
  ASSERT_NE(job.expect("granted", 20000 * kTimeFactor), "") << job.story();
  auto [rc, out] = run_cli(dir, {"run", graph, "--pool", service.endpoint(), "--trace",
                                 dir / "run.json", "--no-progress"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(job.wait(10000 * kTimeFactor)) << job.story();

  const json run = read_json(dir / "run.json");
  const std::vector<json> tasks = slices(run, "task");
  ASSERT_EQ(tasks.size(), 3u) << run.dump(1);
  const int device_pid = tasks[0].at("pid");
  EXPECT_NE(process_name(run, device_pid).find("gpu:0"), std::string::npos) << run.dump(1);
  double job_end_us = -1;
  for (const json &lease : slices(run, "lease")) {
    if (lease.at("name").get<std::string>().rfind("external-job", 0) != 0) continue;
    EXPECT_EQ(lease.at("pid"), device_pid) << "the leased job is not on the device's track";
    EXPECT_NE(lease.at("args").value("holder", "").find("pid " + std::to_string(job.pid())),
              std::string::npos)
        << lease.dump();
    job_end_us = lease.at("ts").get<double>() + lease.at("dur").get<double>();
  }
  ASSERT_GE(job_end_us, 0) << "no slice for the leased job in\n" << run.dump(1);
  for (const json &task : tasks) {
    EXPECT_EQ(task.at("pid"), device_pid);
    // The device was the job's until it ended (20 ms of slack for the two clocks).
    EXPECT_GE(task.at("ts").get<double>(), job_end_us - 20000) << task.dump();
  }

  std::optional<int> status = recorder.wait(30000 * kTimeFactor);
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << exit_text(status) << "\n"
      << recorder.story();
  const json node = read_json(dir / "node.json");
  std::vector<std::string> holders;
  for (const json &lease : slices(node, "lease")) {
    EXPECT_NE(process_name(node, lease.at("pid")).find("gpu:0"), std::string::npos);
    holders.push_back(lease.at("name"));
  }
  auto named = [&](const std::string &prefix) {
    return std::any_of(holders.begin(), holders.end(),
                       [&](const std::string &h) { return h.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(named("external-job")) << node.dump(1);
  EXPECT_TRUE(named("gpuflow")) << "the graph's own lease is missing\n" << node.dump(1);
}

TEST(Timeline, TraceOfAnAbsentServiceSaysWhereItLooked) {
  TempDir dir;
  auto [rc, out] = run_cli(dir, {"trace", "--pool", "unix://" + (dir / "none.sock"), "--seconds",
                                 "1", "--output", dir / "t.json"});
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("none.sock"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.json"));
}
