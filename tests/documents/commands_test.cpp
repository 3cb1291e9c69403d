// External commands as tasks: environment and devices, logs, exit status, timeout, cancel.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpuflow-cmd-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { (void)!system(("rm -rf '" + path + "'").c_str()); }
};

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The runs' log directories under a log dir (each run writes into its own), sorted.
std::vector<std::string> run_dirs(const std::string &log_dir) {
  std::vector<std::string> dirs;
  for (const auto &entry : std::filesystem::directory_iterator(log_dir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("run-", 0) == 0) {
      dirs.push_back(entry.path().string());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// The one run's log directory under log_dir.
std::string run_dir(const std::string &log_dir) {
  std::vector<std::string> dirs = run_dirs(log_dir);
  EXPECT_EQ(dirs.size(), 1u) << log_dir;
  return dirs.empty() ? log_dir + "/<no run directory>" : dirs[0];
}

struct Cmd {
  std::vector<const char *> argv, env;
  gf_command_desc desc = GF_COMMAND_DESC_INIT;
  Cmd(const char *script, const std::string &log_dir, double timeout = 0) {
    argv = {"sh", "-c", script};
    desc.argv = argv.data();
    desc.argc = static_cast<uint32_t>(argv.size());
    desc.log_dir = log_dir.c_str();
    desc.timeout_s = timeout;
  }
};

gf_task add_command(gf_graph *g, const char *name, Cmd &cmd, const gf_resource *res = nullptr,
                    uint32_t res_count = 0, uint32_t retries = 0) {
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = name;
  t.command = &cmd.desc;
  t.resources = res;
  t.resource_count = res_count;
  t.retries = retries;
  gf_task out{0};
  gf_status s = gf_graph_add_task(&out, g, &t);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return out;
}

}  // namespace

TEST(Commands, EnvironmentDevicesAndLogs) {
  TempDir dir;
  Pool pool = make_pool(host_config(1, 2));
  Graph g = make_graph();
  Cmd cpu(
      "echo \"cvd=[$CUDA_VISIBLE_DEVICES] dev=[$GPUFLOW_DEVICES] name=$GPUFLOW_TASK_NAME "
      "extra=$EXTRA pwd=$(pwd)\"; echo to-stderr >&2",
      dir.path);
  cpu.env = {"EXTRA=yes please"};
  cpu.desc.env = cpu.env.data();
  cpu.desc.env_count = 1;
  cpu.desc.working_dir = "/";
  Cmd gpu("echo \"cvd=$CUDA_VISIBLE_DEVICES dev=$GPUFLOW_DEVICES\"", dir.path);
  gf_resource one_gpu = {"GPU", 1};
  gf_task on_cpu = add_command(g.get(), "on-cpu", cpu);
  gf_task on_gpu = add_command(g.get(), "on-gpu", gpu, &one_gpu, 1);
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 30000));

  const std::string logs = run_dir(dir.path);
  EXPECT_EQ(slurp(logs + "/on-cpu.out"), "cvd=[] dev=[] name=on-cpu extra=yes please pwd=/\n");
  EXPECT_EQ(slurp(logs + "/on-cpu.err"), "to-stderr\n");
  uint32_t w = 0;
  GF_ASSERT_OK(gf_run_task_worker(&w, run.get(), on_gpu));
  gf_worker_info info = worker_info(pool.get(), w);
  ASSERT_EQ(info.kind, GF_WORKER_GPU);
  std::string d = std::to_string(info.device);
  EXPECT_EQ(slurp(logs + "/on-gpu.out"), "cvd=" + d + " dev=" + d + "\n");
  GF_ASSERT_OK(gf_run_task_worker(&w, run.get(), on_cpu));
  EXPECT_EQ(worker_info(pool.get(), w).kind, GF_WORKER_CPU);
}

TEST(Commands, FailureNamesTaskExitCodeAndLog) {
  TempDir dir;
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  Cmd fails("echo 'something broke' >&2; exit 3", dir.path);
  gf_task t = add_command(g.get(), "step", fails, nullptr, 0, /*retries=*/1);
  RunPtr run(submit(pool.get(), g.get()));
  std::string m = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), 30000));
  std::string e = task_error(run.get(), t);
  EXPECT_NE(e.find("task 'step': command 'sh' exited with code 3"), std::string::npos) << e;
  const std::string logs = run_dir(dir.path);
  EXPECT_NE(e.find(logs + "/step.2.err"), std::string::npos) << e;  // the second attempt
  EXPECT_NE(e.find("something broke"), std::string::npos) << e;
  uint32_t attempts = 0;
  GF_ASSERT_OK(gf_run_task_attempts(&attempts, run.get(), t));
  EXPECT_EQ(attempts, 2u);
  EXPECT_EQ(slurp(logs + "/step.err"), "something broke\n");
}

TEST(Commands, SignalAndMissingProgram) {
  TempDir dir;
  Pool pool = make_pool(host_config(2, -1));
  Graph g = make_graph();
  Cmd killed("kill -9 $$", dir.path);
  std::vector<const char *> argv = {"/no/such/program-xyz"};
  gf_command_desc missing = GF_COMMAND_DESC_INIT;
  missing.argv = argv.data();
  missing.argc = 1;
  missing.log_dir = dir.path.c_str();
  gf_task a = add_command(g.get(), "killed", killed);
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = "missing";
  t.command = &missing;
  gf_task b;
  GF_ASSERT_OK(gf_graph_add_task(&b, g.get(), &t));
  RunPtr run(submit(pool.get(), g.get()));
  GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), 30000));
  std::string ea = task_error(run.get(), a), eb = task_error(run.get(), b);
  EXPECT_NE(ea.find("was killed by signal 9"), std::string::npos) << ea;
  EXPECT_NE(eb.find("cannot start '/no/such/program-xyz'"), std::string::npos) << eb;
}

TEST(Commands, TimeoutKillsTheProcessGroup) {
  TempDir dir;
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  // The shell leads its own process group and its child (sleep) is in it, so it dies too. It
  // would sleep far past the wait's deadline: the wait's end shows the timeout cut it short.
  const std::string group_file = dir.path + "/group";
  const std::string script = "echo $$ > " + group_file + "; sleep 300; echo never";
  Cmd slow(script.c_str(), dir.path, /*timeout=*/0.3);
  gf_task t = add_command(g.get(), "slow", slow);
  RunPtr run(submit(pool.get(), g.get()));
  GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), 30000));
  pid_t group = 0;
  std::ifstream(group_file) >> group;
  ASSERT_GT(group, 0) << "the command never started";
  EXPECT_TRUE(wait_until([&] { return kill(-group, 0) != 0; }))
      << "process group " << group << " outlived the timeout";
  std::string e = task_error(run.get(), t);
  EXPECT_NE(e.find("task 'slow': command 'sh' timed out after 0.3 s and was killed"),
            std::string::npos)
      << e;
}

TEST(Commands, CancelKillsTheProcess) {
  TempDir dir;
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  std::string pid_file = dir.path + "/pid";
  std::string script = "echo $$ > " + pid_file + "; exec sleep 300";  // far past the deadline
  Cmd slow(script.c_str(), dir.path);
  gf_task t = add_command(g.get(), "sleeper", slow);
  RunPtr run(submit(pool.get(), g.get()));
  pid_t pid = 0;
  for (int i = 0; i < 500 && pid == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(pid_file);
    in >> pid;
  }
  ASSERT_GT(pid, 0) << "the command never started";
  GF_ASSERT_OK(gf_run_cancel(run.get()));
  GF_EXPECT_STATUS(GF_ERR_CANCELLED, gf_run_wait(run.get(), 30000));
  EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " still exists after cancel";
  std::string e = task_error(run.get(), t);
  EXPECT_NE(e.find("cancelled; command 'sh' was killed"), std::string::npos) << e;
}

TEST(Commands, InvalidDescriptionsAreRefusedNamingTheTask) {
  Graph g = make_graph();
  gf_command_desc c = GF_COMMAND_DESC_INIT;
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = "bad";
  t.command = &c;
  gf_task out;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&out, g.get(), &t));
  EXPECT_NE(m.find("task 'bad': the command needs argv"), std::string::npos) << m;
  c.struct_size = 5;
  m = GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_graph_add_task(&out, g.get(), &t));
  EXPECT_NE(m.find("gf_command_desc"), std::string::npos) << m;
}

TEST(Commands, RunsOfOneGraphKeepTheirOwnLogs) {
  // One graph, run twice one after another, then twice at once on two pools (the same run
  // number in each), then twice at once on one pool: every run leaves its own logs, with its
  // own output, and a failing task's error names its own run's log.
  TempDir dir;
  Graph g = make_graph();
  // Each run prints something of its own: the shell's process id.
  Cmd echo("echo \"pid=$$\"; echo \"err=$$\" >&2; exit 1", dir.path);
  gf_task t = add_command(g.get(), "report", echo);
  std::vector<std::string> errors;
  auto finish = [&](gf_run *run) {
    GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run, 30000));
    errors.push_back(task_error(run, t));
  };
  {
    Pool pool = make_pool(host_config(2, -1));
    for (int i = 0; i < 2; ++i) {
      RunPtr run(submit(pool.get(), g.get()));
      finish(run.get());
    }
  }
  {
    Pool a = make_pool(host_config(1, -1)), b = make_pool(host_config(1, -1));
    RunPtr ra(submit(a.get(), g.get())), rb(submit(b.get(), g.get()));
    finish(ra.get());
    finish(rb.get());
  }
  {
    Pool pool = make_pool(host_config(2, -1));
    RunPtr r1(submit(pool.get(), g.get())), r2(submit(pool.get(), g.get()));
    finish(r1.get());
    finish(r2.get());
  }
  std::vector<std::string> dirs = run_dirs(dir.path);
  ASSERT_EQ(dirs.size(), 6u);
  std::vector<std::string> outputs;
  for (const std::string &d : dirs) {
    std::string out = slurp(d + "/report.out");
    ASSERT_EQ(out.rfind("pid=", 0), 0u) << d << ": '" << out << "'";
    std::string pid = out.substr(4);
    EXPECT_EQ(slurp(d + "/report.err"), "err=" + pid) << d;
    outputs.push_back(out);
    // Exactly one run's error names this log.
    int named = 0;
    for (const std::string &e : errors) named += e.find(d + "/report.err") != std::string::npos;
    EXPECT_EQ(named, 1) << d;
  }
  std::sort(outputs.begin(), outputs.end());
  EXPECT_EQ(std::unique(outputs.begin(), outputs.end()), outputs.end())
      << "two runs wrote the same log";
}

TEST(Commands, TasksOfOneRunNeverShareALog) {
  // Names that are not plain file names, an unnamed task, and a name that reads like a retry of
  // another task ("step.2" next to "step" on its second attempt) each get their own files.
  TempDir dir;
  Pool pool = make_pool(host_config(2, -1));
  Graph g = make_graph();
  std::vector<std::unique_ptr<Cmd>> cmds;
  std::vector<std::string> scripts;
  const char *names[] = {"a b", "a_b", "a/b", "step", "step.2", nullptr};
  for (int i = 0; i < 6; ++i) scripts.push_back("echo " + std::to_string(i));
  scripts[3] = "if [ \"$GPUFLOW_ATTEMPT\" = 1 ]; then exit 1; fi; echo 3";  // step: retried
  for (int i = 0; i < 6; ++i) {
    cmds.push_back(std::make_unique<Cmd>(scripts[i].c_str(), dir.path));
    add_command(g.get(), names[i], *cmds.back(), nullptr, 0, /*retries=*/i == 3 ? 1 : 0);
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 30000));
  std::vector<std::string> seen;
  for (const auto &entry : std::filesystem::directory_iterator(run_dir(dir.path))) {
    if (entry.path().extension() == ".out") seen.push_back(slurp(entry.path().string()));
  }
  std::sort(seen.begin(), seen.end());
  // Every task's output survived (step's first attempt printed nothing).
  EXPECT_EQ(seen, (std::vector<std::string>{"", "0\n", "1\n", "2\n", "3\n", "4\n", "5\n"}));
}
