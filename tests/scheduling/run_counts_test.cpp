// A run's counters and task errors as callers read them: a cancelled run counts every task once,
// a task stopped by the cancel (a body that gives up, a command killed) as cancelled; and a
// task's error names the task by one rule (graph/task_error.hpp), so a caller never reads the
// text to decide whether to name it.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

// A command task running `script` under sh, its logs in `log_dir`.
struct Command {
  std::vector<const char *> argv;
  gf_command_desc desc = GF_COMMAND_DESC_INIT;
  Command(const char *script, const std::string &log_dir) {
    argv = {"sh", "-c", script};
    desc.argv = argv.data();
    desc.argc = static_cast<uint32_t>(argv.size());
    desc.log_dir = log_dir.c_str();
  }
};

gf_task add_command(gf_graph *g, const char *name, Command &cmd, std::vector<gf_task> after = {}) {
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = name;
  t.command = &cmd.desc;
  t.after = after.empty() ? nullptr : after.data();
  t.after_count = static_cast<uint32_t>(after.size());
  gf_task out{0};
  const gf_status s = gf_graph_add_task(&out, g, &t);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return out;
}

// A task whose body succeeds at once, after `after`.
gf_task add_quick(gf_graph *g, const char *name, std::vector<gf_task> after = {}) {
  TaskSpec spec;
  spec.name = name;
  spec.after = std::move(after);
  spec.cpu = [](gf_task_ctx *) { return 0; };
  return must_add_task(g, spec);
}

void expect_each_task_counted_once(gf_run *run, const std::vector<gf_task> &tasks) {
  uint64_t succeeded = 0, failed = 0, cancelled = 0;
  for (gf_task t : tasks) {
    const gf_task_state s = task_state(run, t);
    succeeded += s == GF_TASK_SUCCEEDED;
    failed += s == GF_TASK_FAILED;
    cancelled += s == GF_TASK_CANCELLED;
  }
  const gf_run_stats st = run_stats(run);
  EXPECT_EQ(st.tasks, tasks.size());
  EXPECT_EQ(st.succeeded + st.failed + st.cancelled, st.tasks) << "a task counted twice or never";
  EXPECT_EQ(st.succeeded, succeeded);
  EXPECT_EQ(st.failed, failed);
  EXPECT_EQ(st.cancelled, cancelled);
}

// Each test's command logs in a directory of its own, removed after it.
class RunCounts : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuflow-counts-XXXXXX";
    logs_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(logs_); }
  std::string logs_;
};

}  // namespace

TEST_F(RunCounts, CancelledRunCountsEveryTaskOnceAsCancelled) {
  Pool pool = make_pool(host_config(3, -1));
  Graph g = make_graph();
  auto started = std::make_shared<std::atomic<int>>(0);
  std::vector<gf_task> tasks;

  const gf_task first = add_quick(g.get(), "done-before");
  tasks.push_back(first);

  // A body that runs until it sees the cancel, then gives up: it fails the attempt.
  TaskSpec gives_up;
  gives_up.name = "gives-up";
  gives_up.after = {first};
  gives_up.cpu = [started](gf_task_ctx *ctx) {
    started->fetch_add(1);
    while (gf_task_ctx_cancelled(ctx) == 0) usleep(1000);
    gf_task_ctx_fail(ctx, "stopped: the run was cancelled");
    return 1;
  };
  const gf_task body = must_add_task(g.get(), gives_up);
  tasks.push_back(body);

  // A command the cancel kills.
  const std::string marker = logs_ + "/started";
  const std::string script = "touch '" + marker + "'; exec sleep 30";
  Command sleeper(script.c_str(), logs_);
  const gf_task command = add_command(g.get(), "sleeper", sleeper, {first});
  tasks.push_back(command);

  // Waiting on both: never starts.
  tasks.push_back(add_quick(g.get(), "later", {body, command}));

  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(wait_until([&] { return started->load() == 1 && access(marker.c_str(), F_OK) == 0; }))
      << "the body and the command never both ran";
  GF_ASSERT_OK(gf_run_cancel(run.get()));
  GF_EXPECT_STATUS(GF_ERR_CANCELLED, gf_run_wait(run.get(), kWaitMs));

  EXPECT_EQ(task_state(run.get(), first), GF_TASK_SUCCEEDED);
  EXPECT_EQ(task_state(run.get(), body), GF_TASK_CANCELLED) << task_error(run.get(), body);
  EXPECT_EQ(task_state(run.get(), command), GF_TASK_CANCELLED) << task_error(run.get(), command);
  EXPECT_EQ(task_state(run.get(), tasks.back()), GF_TASK_CANCELLED);
  // What the attempts said is kept.
  EXPECT_EQ(task_error(run.get(), body), "stopped: the run was cancelled");
  EXPECT_EQ(task_error(run.get(), command).rfind("task 'sleeper': cancelled; command 'sh'", 0), 0u)
      << task_error(run.get(), command);
  const gf_run_stats st = run_stats(run.get());
  EXPECT_EQ(st.succeeded, 1u);
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.cancelled, 3u);
  expect_each_task_counted_once(run.get(), tasks);
}

TEST_F(RunCounts, FailedRunCountsEachTaskOnceAndNamesACommandTaskOnce) {
  Pool pool = make_pool(host_config(2, -1));
  Graph g = make_graph();
  Command boom("exit 3", logs_);
  const gf_task command = add_command(g.get(), "boom", boom);
  const gf_task dependent = add_quick(g.get(), "after", {command});
  Command next("true", logs_);
  const gf_task next_command = add_command(g.get(), "next", next, {command});
  const gf_task ok = add_quick(g.get(), "fine");
  RunPtr run(submit(pool.get(), g.get()));
  const std::string summary = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), kWaitMs));
  // The run's summary names the task once.
  EXPECT_EQ(summary.rfind("task 'boom' failed: command 'sh' exited with code 3", 0), 0u) << summary;
  // A command task's error starts with its name, whoever wrote it.
  EXPECT_EQ(task_error(run.get(), command).rfind("task 'boom': command 'sh' exited with code 3", 0),
            0u)
      << task_error(run.get(), command);
  EXPECT_EQ(task_error(run.get(), next_command),
            "task 'next': not run: its dependency task 'boom' failed");
  // Any other task's error is the words alone.
  EXPECT_EQ(task_error(run.get(), dependent), "not run: its dependency task 'boom' failed");
  EXPECT_EQ(task_state(run.get(), ok), GF_TASK_SUCCEEDED);
  EXPECT_EQ(task_state(run.get(), dependent), GF_TASK_FAILED);
  expect_each_task_counted_once(run.get(), {command, dependent, next_command, ok});
}

TEST_F(RunCounts, ABodyErrorIsItsOwnWordsAndTheSummaryNamesTheTask) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  TaskSpec spec;
  spec.name = "k";
  spec.cpu = [](gf_task_ctx *ctx) {
    gf_task_ctx_fail(ctx, "disk on fire");
    return 1;
  };
  const gf_task t = must_add_task(g.get(), spec);
  RunPtr run(submit(pool.get(), g.get()));
  const std::string summary = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(summary, "task 'k' failed: disk on fire (1 task(s) failed in all)");
  EXPECT_EQ(task_error(run.get(), t), "disk on fire");
}
