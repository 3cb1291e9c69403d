// A lease owns its job (issue 24, item 1; docs/service.md, "A lease owns its job"): `gpuflow
// lease -- COMMAND` against a `gpuflow serve` process, with COMMAND a shell that leaves children,
// grandchildren, a child that ignores SIGTERM and a background orphan. Whatever ends the first
// job — COMMAND exiting, SIGTERM, Ctrl-C or SIGKILL to its wrapper, the service killed and
// restarted under it — a second job queued for the same single device must start only when no
// process of the first is left. The second job checks that itself, as its first act: it scans
// /proc for processes whose environment carries the first job's marker (each test's own, so the
// jobs of tests running beside it are not mistaken for these).
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "processes.hpp"

using namespace gfsvc;

namespace {

// Every process of the first job has this in its environment.
constexpr const char *kMarkerName = "GFTEST_FIRST_JOB";

// COMMAND of the first job: processes of every kind, then "ready", then `main`.
std::string first_job(const std::string &main) {
  return "(trap '' TERM; sleep 300) & "      // a child that ignores SIGTERM
         "sh -c 'sleep 300 & sleep 300' & "  // a child with a grandchild
         "(sleep 300 &); "                   // an orphan: its parent subshell exits at once
         "sh -c 'trap \"\" TERM INT HUP; sleep 300' & "  // a child that ignores the stop signals
         "echo ready; " +
         main;
}

std::string read_file(const std::string &path);

class JobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    marker_ = std::string(kMarkerName) + "=" + (dir / "first");
    // The second job's COMMAND: one line per process of the first job still there, then
    // "started".
    scan_ = dir / "scan.sh";
    std::ofstream(scan_) << "#!/bin/sh\n"
                            "for d in /proc/[0-9]*; do\n"
                            "  if tr '\\0' '\\n' < $d/environ 2>/dev/null | grep -qx \"$1\"; then\n"
                            "    echo \"alive ${d#/proc/} $(tr '\\0' ' ' < $d/cmdline)\"\n"
                            "  fi\n"
                            "done\n"
                            "echo started\n";
    ::chmod(scan_.c_str(), 0755);
  }

  std::vector<std::string> lease(const Service &s, std::vector<std::string> options,
                                 const std::vector<std::string> &command) {
    std::vector<std::string> argv = {GPUFLOW_CLI_PATH, "lease", "--pool", s.endpoint()};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }

  // The first job, once it says it is ready (every process of it started).
  std::unique_ptr<Proc> start_first(const Service &s, const std::string &main) {
    // The marker goes to COMMAND (through env), not to the wrapper: a wrapper still on its way
    // out after its release holds nothing.
    auto p = std::make_unique<Proc>(
        lease(s, {"--grace", "1"}, {"env", marker_, "sh", "-c", first_job(main)}),
        dir / "first.err");
    EXPECT_NE(p->expect("ready", 20000 * kTimeFactor), "") << p->story();
    return p;
  }

  // The second job, queued behind the first for the same device.
  std::unique_ptr<Proc> queue_second(const Service &s) {
    return std::make_unique<Proc>(lease(s, {"--timeout", "60"}, {scan_, marker_}),
                                  dir / "second.err");
  }

  // The second job ran, and found nothing of the first.
  void expect_second_alone(Proc &second, const std::string &service_log = "") {
    std::string seen;
    for (;;) {
      std::optional<std::string> l = second.line(40000 * kTimeFactor);
      ASSERT_TRUE(l) << "the second job never started: " << second.story() << seen
                     << "\nthe service's log:\n"
                     << service_log << read_file(dir / "serve.log");
      if (*l == "started") break;
      seen += *l + "\n";
    }
    EXPECT_EQ(seen, "") << "processes of the first job were alive when the second got the device";
    std::optional<int> status = second.wait(10000 * kTimeFactor);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << exit_text(status) << second.story();
  }

  TempDir dir;
  std::string marker_, scan_;
};

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int exit_code(std::optional<int> status) {
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

TEST_F(JobsTest, WhatCommandLeavesBehindEndsBeforeTheLeaseGoes) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto first = start_first(service, "exit 7");
  auto second = queue_second(service);
  expect_second_alone(*second);
  EXPECT_EQ(exit_code(first->wait(10000 * kTimeFactor)), 7) << first->story();
}

TEST_F(JobsTest, SigtermToTheWrapperEndsTheWholeJob) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto first = start_first(service, "sleep 300");
  auto second = queue_second(service);
  first->signal(SIGTERM);
  expect_second_alone(*second);
  EXPECT_EQ(exit_code(first->wait(10000 * kTimeFactor)), 128 + SIGTERM) << first->story();
}

TEST_F(JobsTest, CtrlCReachesTheWholeJob) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  // COMMAND runs a foreground child, as at a prompt: SIGINT ends it, and then COMMAND.
  auto first = start_first(service, "sleep 300; echo after");
  auto second = queue_second(service);
  // dash catches SIGINT while it forks its foreground command, and a child it forked loses one
  // that comes before its exec: then the shell waits on, as at a prompt, and the user presses
  // Ctrl-C again. Each one reaches the whole job, and the second job checks that the lease went
  // only once all of it was gone.
  std::optional<int> status;
  for (int press = 0; press < 5 && !status; ++press) {
    first->signal(SIGINT);
    status = first->wait(3000 * kTimeFactor);
  }
  expect_second_alone(*second);
  const int code = exit_code(status);
  EXPECT_TRUE(code == 128 + SIGINT || code == 0) << code << first->story();
}

// At a terminal, Ctrl-C is the terminal's SIGINT to its foreground process group: the job's,
// which `gpuflow lease` made the foreground. Its background processes ignore SIGINT (as a
// shell's do); the wrapper ends them when COMMAND is gone.
TEST_F(JobsTest, CtrlCAtTheTerminalReachesTheWholeJob) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  // COMMAND ends in `exec sleep`: a shell between `echo ready` and forking its foreground
  // command may let a Ctrl-C pass, and a shell does not decide the lease's fate.
  std::vector<std::string> args =
      lease(service, {"--grace", "1"}, {"env", marker_, "sh", "-c", first_job("exec sleep 300")});
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int terminal = -1;
  const pid_t wrapper = ::forkpty(&terminal, nullptr, nullptr, nullptr);
  ASSERT_GE(wrapper, 0) << std::strerror(errno);
  if (wrapper == 0) {
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  std::string seen;
  auto read_terminal = [&](int timeout_ms) {
    pollfd p{terminal, POLLIN, 0};
    char chunk[4096];
    if (::poll(&p, 1, timeout_ms) > 0) {
      ssize_t n = ::read(terminal, chunk, sizeof chunk);
      if (n > 0) seen.append(chunk, static_cast<size_t>(n));
    }
  };
  const int64_t start = now_ns();
  while (!contains(seen, "ready") && ms_since(start) < 20000 * kTimeFactor) read_terminal(100);
  ASSERT_TRUE(contains(seen, "ready")) << seen;
  // The terminal's foreground is the job's process group, not the wrapper's (a session leader
  // here, its group id its pid).
  const pid_t foreground = ::tcgetpgrp(terminal);
  ASSERT_GT(foreground, 0) << std::strerror(errno);
  EXPECT_NE(foreground, wrapper) << "the wrapper kept the terminal";
  // The group's leader is COMMAND: Ctrl-C goes once it is `sleep`.
  auto leader_is_sleep = [&] {
    std::ifstream in("/proc/" + std::to_string(foreground) + "/cmdline");
    std::string first;
    std::getline(in, first, '\0');
    return first == "sleep";
  };
  const int64_t exec_wait = now_ns();
  while (!leader_is_sleep() && ms_since(exec_wait) < 20000 * kTimeFactor) ::usleep(2000);
  ASSERT_TRUE(leader_is_sleep());
  auto second = queue_second(service);
  ASSERT_EQ(::write(terminal, "\x03", 1), 1);  // Ctrl-C
  expect_second_alone(*second, service.log());
  int status = 0;
  const int64_t waited = now_ns();
  while (::waitpid(wrapper, &status, WNOHANG) == 0 && ms_since(waited) < 20000 * kTimeFactor)
    read_terminal(50);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT) << exit_text(status) << "\n"
                                                                        << seen;
  ::close(terminal);
}

TEST_F(JobsTest, AKilledWrappersJobKeepsTheDeviceUntilItIsGone) {
  Service service(dir, 1, {"--job-kill-grace", "1"});
  ASSERT_TRUE(service.ready()) << service.log();
  auto first = start_first(service, "sleep 300");
  auto second = queue_second(service);
  first->signal(SIGKILL);
  ASSERT_TRUE(first->wait(5000 * kTimeFactor));
  expect_second_alone(*second);
  EXPECT_TRUE(contains(service.log(), "stays held for process group")) << service.log();
  EXPECT_TRUE(contains(service.log(), "SIGKILL to")) << service.log();
}

// Waits for `pred` (the deadline only guards a hang).
template <typename Pred>
bool wait_for(Pred pred, int timeout_ms) {
  const int64_t start = now_ns();
  while (!pred()) {
    if (ms_since(start) > timeout_ms) return false;
    ::usleep(10000);
  }
  return true;
}

// A cgroup v2 directory the test may make children in and move processes into, for a service's
// --cgroup-root; empty, with `why`, where this machine has none.
std::string writable_cgroup_root(std::string &why) {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string mount;
  for (std::string line; mount.empty() && std::getline(mounts, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root;
    head >> id >> parent >> dev >> root >> mount;
  }
  if (mount.empty()) {
    why = "no cgroup v2 hierarchy is mounted here";
    return {};
  }
  std::ifstream self("/proc/self/cgroup");
  std::string own;
  for (std::string line; std::getline(self, line);)
    if (line.rfind("0::", 0) == 0) own = line.substr(3);
  if (own == "/") own.clear();
  const std::string dir = mount + own + "/gpuflow-test-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    why = "cannot make a cgroup under " + mount + own + ": " + std::strerror(errno);
    return {};
  }
  // Moving a process needs write access to cgroup.procs here and where it comes from.
  std::ofstream procs(dir + "/cgroup.procs");
  procs << ::getpid() << std::flush;
  const bool moved = procs.good();
  procs.close();
  std::ofstream back(mount + own + "/cgroup.procs");
  back << ::getpid() << std::flush;
  if (!moved || !back.good()) {
    ::rmdir(dir.c_str());
    why = "cannot move a process into a cgroup under " + mount + own;
    return {};
  }
  return dir;
}

// Where the service was delegated a cgroup subtree (--cgroup-root), each job is a cgroup: a
// process that leaves the job's process group (setsid) once its wrapper is SIGKILLed is still
// the job's, and the device stays with it until it is gone.
class CgroupJobsTest : public JobsTest {
 protected:
  void SetUp() override {
    JobsTest::SetUp();
    std::string why;
    root_ = writable_cgroup_root(why);
    if (root_.empty()) GTEST_SKIP() << "no writable cgroup v2 hierarchy: " << why;
  }
  void TearDown() override {
    if (root_.empty()) return;
    // Whatever a failed test left there goes with its cgroups.
    for (const auto &e : std::filesystem::directory_iterator(root_)) {
      if (!e.is_directory()) continue;
      std::ofstream(e.path() / "cgroup.kill") << "1";
      wait_for([&] { return ::rmdir(e.path().c_str()) == 0; }, 10000 * kTimeFactor);
    }
    ::rmdir(root_.c_str());
  }
  std::string root_;
};

TEST_F(CgroupJobsTest, AJobThatLeavesItsGroupAfterItsWrapperIsKilledKeepsTheDevice) {
  // A grace far past every wait here: the job ends only when the test ends the child that left,
  // so the child's leaving comes first whatever the machine's load.
  Service service(dir, 1, {"--job-kill-grace", "600", "--cgroup-root", root_});
  ASSERT_TRUE(service.ready()) << service.log();
  EXPECT_TRUE(contains(service.log(), "jobs are followed as cgroups under " + root_))
      << service.log();
  auto [rc, status] = run_cli(dir, {"status", "--json", "--pool", service.endpoint()});
  EXPECT_TRUE(contains(status, "\"job_tracking\":\"cgroups under " + root_ + "\"")) << status;
  // Once its wrapper is gone, a child that ignores SIGTERM makes itself a session of its own,
  // out of the job's process group, says its pid and stays; the rest of the job ends at the
  // service's SIGTERM. It says "ready" once it ignores SIGTERM, so that the wrapper's kill comes
  // after.
  const std::string escaped = dir / "escaped";
  const std::string job =
      "W=$PPID; export W; "
      "sh -c 'trap \"\" TERM HUP INT; echo ready; while kill -0 $W 2>/dev/null; do sleep 0.05; "
      "done; "
      "exec setsid sh -c \"echo \\$\\$ > " +
      escaped + ".new && mv " + escaped + ".new " + escaped +
      "; exec sleep 300\"' & exec sleep 300";
  Proc first(lease(service, {}, {"env", marker_, "sh", "-c", job}), dir / "first.err");
  ASSERT_NE(first.expect("ready", 20000 * kTimeFactor), "") << first.story();
  auto second = queue_second(service);
  first.signal(SIGKILL);
  ASSERT_TRUE(first.wait(5000 * kTimeFactor));
  ASSERT_TRUE(wait_for([&] { return read_file(escaped) != ""; }, 20000 * kTimeFactor))
      << "the child never left the job's group\n"
      << service.log();
  const pid_t child = std::stoi(read_file(escaped));
  EXPECT_EQ(::getsid(child), child) << "a session of its own, out of the job's group";
  // The rest of the job is gone: the child alone is left in the lease's cgroup...
  std::string cgroup;
  for (const auto &e : std::filesystem::directory_iterator(root_))
    if (e.is_directory()) cgroup = e.path();
  ASSERT_TRUE(contains(cgroup, root_ + "/lease-")) << cgroup;
  EXPECT_TRUE(
      wait_for([&] { return read_file(cgroup + "/cgroup.procs") == std::to_string(child) + "\n"; },
               20000 * kTimeFactor))
      << read_file(cgroup + "/cgroup.procs");
  EXPECT_TRUE(contains(service.log(), "orphaned process group")) << service.log();
  // ...which still holds the device: the second job waits.
  auto [src, queued] = run_cli(dir, {"status", "--json", "--pool", service.endpoint()});
  EXPECT_TRUE(contains(queued, "\"queued\":[{")) << queued << service.log();
  ::kill(child, SIGKILL);
  expect_second_alone(*second, service.log());
  EXPECT_TRUE(contains(service.log(), "(cgroup " + root_ + "/lease-")) << service.log();
  // The job's cgroup goes with its lease.
  EXPECT_TRUE(wait_for(
      [&] {
        for (const auto &e : std::filesystem::directory_iterator(root_))
          if (e.is_directory()) return false;
        return true;
      },
      10000 * kTimeFactor))
      << "a lease's cgroup stayed after its job was gone";
}

// The service killed and started again under such a job keeps its lease for as long as the
// job's cgroup holds a process, and ends the cgroup once the job's wrapper is killed.
TEST_F(CgroupJobsTest, ARestartedServiceKeepsTheLeaseWhileTheJobsCgroupRuns) {
  auto service =
      std::make_unique<Service>(dir, 1, std::vector<std::string>{"--cgroup-root", root_});
  ASSERT_TRUE(service->ready()) << service->log();
  // A child out of the job's process group from the start: a session of its own.
  // It ignores SIGTERM: only the kill of the whole cgroup ends it.
  auto first =
      start_first(*service, "setsid sh -c 'trap \"\" TERM; exec sleep 300' & exec sleep 300");
  service->proc().signal(SIGKILL);
  ASSERT_TRUE(service->proc().wait(5000 * kTimeFactor));
  service = std::make_unique<Service>(
      dir, 1, std::vector<std::string>{"--job-kill-grace", "1", "--cgroup-root", root_},
      "serve2.log");
  ASSERT_TRUE(service->ready()) << service->log();
  EXPECT_TRUE(contains(service->log(), "kept: its holder")) << service->log();
  auto second = queue_second(*service);
  first->signal(SIGKILL);
  ASSERT_TRUE(first->wait(5000 * kTimeFactor));
  expect_second_alone(*second, service->log());
  EXPECT_TRUE(contains(service->log(), "(cgroup " + root_ + "/lease-")) << service->log();
  EXPECT_TRUE(contains(service->log(), "SIGKILL to")) << service->log();
}

// What systemd's Delegate=yes makes of the unit's cgroup (the trusted.delegate mark), with the
// service started in it: it finds the subtree itself, moves out of its root into ROOT/service
// (killing what a service before it left there), and runs each job in ROOT/lease-ID beside it.
TEST_F(CgroupJobsTest, AServiceInADelegatedCgroupRunsJobsBesideItself) {
  ASSERT_EQ(::setxattr(root_.c_str(), "trusted.delegate", "1", 1, 0), 0) << std::strerror(errno);
  ASSERT_EQ(::mkdir((root_ + "/service").c_str(), 0755), 0) << std::strerror(errno);
  Proc leftover({"/bin/sh", "-c", "echo $$ > " + root_ + "/service/cgroup.procs && exec sleep 300"},
                dir / "leftover.err");
  ASSERT_TRUE(wait_for([&] { return read_file(root_ + "/service/cgroup.procs") != ""; },
                       10000 * kTimeFactor));
  const std::string socket = dir / "gf.sock";
  Proc service({"/bin/sh", "-c", "echo $$ > " + root_ + "/cgroup.procs && exec \"$0\" \"$@\"",
                GPUFLOW_CLI_PATH, "serve", "--backend", "host", "--emulated-devices", "1",
                "--socket", socket},
               dir / "serve.log");
  ASSERT_NE(service.expect("gpuflow serve: listening on", 20000 * kTimeFactor), "")
      << service.story();
  EXPECT_TRUE(contains(service.stderr_text(), "jobs are followed as cgroups under " + root_))
      << service.stderr_text();
  EXPECT_TRUE(contains(service.stderr_text(),
                       "killed 1 process(es) a service before this one "
                       "left in " +
                           root_ + "/service"))
      << service.stderr_text();
  EXPECT_TRUE(leftover.wait(10000 * kTimeFactor)) << "what the service before left runs on";
  const std::string own = read_file("/proc/" + std::to_string(service.pid()) + "/cgroup");
  EXPECT_TRUE(contains(own, "/service\n")) << own;
  EXPECT_EQ(read_file(root_ + "/cgroup.procs"), "") << "no process stays in the subtree's root";
  auto [rc, out] = run_cli(
      dir, {"lease", "--pool", "unix://" + socket, "--", "grep", "^0::", "/proc/self/cgroup"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "/lease-1\n")) << out;
  service.signal(SIGTERM);
  EXPECT_TRUE(service.wait(10000 * kTimeFactor)) << service.story();
}

// A cgroup root asked for that cannot be used stops the start, naming it: jobs must not be
// followed less closely than the site asked without anyone hearing of it.
TEST_F(JobsTest, ACgroupRootThatIsNoCgroupStopsTheStart) {
  const std::string root = dir / "not-a-cgroup";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  auto [rc, out] = run_cli(dir, {"serve", "--backend", "host", "--emulated-devices", "1",
                                 "--socket", dir / "gf.sock", "--cgroup-root", root});
  EXPECT_NE(rc, 0) << out;
  EXPECT_TRUE(contains(out, "cgroup_root " + root + " is not a directory of a cgroup v2 hierarchy"))
      << out;
}

TEST_F(JobsTest, DoctorSaysHowJobsAreFollowed) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto [rc, out] = run_cli(dir, {"doctor", "--pool", service.endpoint()});
  EXPECT_TRUE(contains(out, "note jobs of leases are followed as process groups (") ||
              contains(out, "note jobs of leases are followed as cgroups under "))
      << out;
}

// The service dies under a running job; the next one must not hand its device out.
class RestartTest : public JobsTest {
 protected:
  void restart_under_running_job() {
    service_ = std::make_unique<Service>(dir, 1);
    ASSERT_TRUE(service_->ready()) << service_->log();
    first_ = start_first(*service_, "sleep 300");
    service_->proc().signal(SIGKILL);
    ASSERT_TRUE(service_->proc().wait(5000));
    service_ = std::make_unique<Service>(dir, 1, std::vector<std::string>{"--job-kill-grace", "1"},
                                         "serve2.log");
    ASSERT_TRUE(service_->ready()) << service_->log();
    EXPECT_TRUE(contains(service_->log(), "kept: its holder")) << service_->log();
    second_ = queue_second(*service_);
    // Queued behind the kept lease, not granted: status lists it as waiting.
    const int64_t start = now_ns();
    bool queued = false;
    while (!queued && ms_since(start) < 20000 * kTimeFactor) {
      auto [rc, out] = run_cli(dir, {"status", "--json", "--pool", service_->endpoint()});
      queued = rc == 0 && contains(out, "\"queued\":[{");
      if (!queued) ::usleep(20000);
    }
    ASSERT_TRUE(queued) << service_->log();
  }
  std::unique_ptr<Service> service_;
  std::unique_ptr<Proc> first_, second_;
};

TEST_F(RestartTest, TheJobEndingGivesTheDeviceBack) {
  restart_under_running_job();
  first_->signal(SIGTERM);
  expect_second_alone(*second_, service_->log());
  EXPECT_EQ(exit_code(first_->wait(10000 * kTimeFactor)), 128 + SIGTERM) << first_->story();
}

TEST_F(RestartTest, AWrapperKilledAfterTheRestartStillHasItsJobEnded) {
  restart_under_running_job();
  first_->signal(SIGKILL);
  ASSERT_TRUE(first_->wait(5000 * kTimeFactor));
  expect_second_alone(*second_);
  EXPECT_TRUE(contains(service_->log(), "SIGKILL to")) << service_->log();
}

// A clean stop keeps the saved grants only while a lease is held (a restart must know it); with
// none, it leaves nothing behind.
TEST_F(JobsTest, ACleanStopLeavesSavedGrantsOnlyForLeasesHeld) {
  struct stat st {};
  {
    Service service(dir, 1);
    ASSERT_TRUE(service.ready()) << service.log();
    auto [rc, out] = run_cli(dir, {"lease", "--pool", service.endpoint(), "--", "true"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(::stat((dir / "gf.sock.leases.a").c_str(), &st), 0) << "saved while it ran";
    service.proc().signal(SIGTERM);
    ASSERT_TRUE(service.proc().wait(10000 * kTimeFactor));
  }
  EXPECT_NE(::stat((dir / "gf.sock.leases.a").c_str(), &st), 0);
  EXPECT_NE(::stat((dir / "gf.sock.leases.b").c_str(), &st), 0);
  {
    Service service(dir, 1);
    ASSERT_TRUE(service.ready()) << service.log();
    auto first = start_first(service, "sleep 300");
    service.proc().signal(SIGTERM);
    ASSERT_TRUE(service.proc().wait(10000 * kTimeFactor));
    first->signal(SIGTERM);  // the job ends with it (nothing left running after the test)
    EXPECT_TRUE(first->wait(10000 * kTimeFactor));
  }
  EXPECT_EQ(::stat((dir / "gf.sock.leases.a").c_str(), &st), 0)
      << "a lease was held: its grant stays for the next service";
}

TEST_F(JobsTest, ASavedBookThatDoesNotCheckOutIsNotUsed) {
  // One slot garbage, the other cut short in its payload: neither is used, and the service runs.
  std::ofstream(dir / "gf.sock.leases.a") << "not a lease book at all";
  std::ofstream(dir / "gf.sock.leases.b")
      << std::string("GFLS\x01\0\0\0\x05", 9) << std::string(40, 'x');
  ::chmod((dir / "gf.sock.leases.a").c_str(), 0600);
  ::chmod((dir / "gf.sock.leases.b").c_str(), 0600);
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  EXPECT_TRUE(contains(service.log(), "saved grants not used: " + (dir / "gf.sock.leases.a") +
                                          ": no saved lease book there"))
      << service.log();
  EXPECT_TRUE(contains(service.log(), "gf.sock.leases.b: its last write was cut short"))
      << service.log();
  auto [rc, out] = run_cli(dir, {"lease", "--pool", service.endpoint(), "--", "true"});
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(JobsTest, ASavedBookOthersMayWriteIsMovedAside) {
  const std::string slot = dir / "gf.sock.leases.a";
  std::ofstream(slot) << "x";
  ::chmod(slot.c_str(), 0666);
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  EXPECT_TRUE(contains(service.log(),
                       "others than the service's user may write it; moved to " + slot + ".bad"))
      << service.log();
  struct stat st {};
  ASSERT_EQ(::stat(slot.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "made afresh, the service's own";
  EXPECT_EQ(::stat((slot + ".bad").c_str(), &st), 0);
}

// A FIFO in a slot's place is neither opened for reading (which would wait for a writer and hold
// the start up) nor used: it is moved aside, named for what it is.
TEST_F(JobsTest, ASavedBookSlotThatIsAFifoIsMovedAsideNamingIt) {
  const std::string slot = dir / "gf.sock.leases.b";
  ASSERT_EQ(::mkfifo(slot.c_str(), 0600), 0);
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  EXPECT_TRUE(contains(service.log(), slot +
                                          ": it is a FIFO (named pipe), not a regular file; "
                                          "moved to " +
                                          slot + ".bad"))
      << service.log();
  struct stat st {};
  ASSERT_EQ(::lstat(slot.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "made afresh, a regular file";
  ASSERT_EQ(::lstat((slot + ".bad").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

}  // namespace
