// External commands as task bodies: the child runs under its own libuv loop on the worker thread
// that runs the task, so a command occupies its worker (and the resources its task holds) exactly
// as long as the process lives. A timer polls for cancellation and enforces the timeout.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "commands/command_bodies.hpp"
#include "core/clock.hpp"
#include "gpuflow.h"
#include "graph/graph.hpp"

extern char **environ;

namespace gf {
namespace {

constexpr uint64_t kPollMs = 20;           // cancellation and timeout checks
constexpr double kKillGraceSeconds = 2.0;  // SIGTERM, then SIGKILL after this long

std::string env_name(const std::string &entry) {
  return entry.substr(0, entry.find('='));
}

// A file name for the task's logs, unique within the run: the task's name when it is a plain
// file name that no other task's logs can take; otherwise (unusual characters, too long, a
// leading '.', a trailing ".<digits>" that reads as an attempt number, or no name) the name with
// anything unusual replaced by '_', then '@' and the task's index, which no plain name contains.
std::string log_stem(const std::string &name, uint32_t task) {
  const std::string index = std::to_string(task);
  if (name.empty()) return "task@" + index;
  std::string stem;
  for (char c : name.substr(0, 200)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    stem += ok ? c : '_';
  }
  if (stem.front() == '.') stem.front() = '_';
  size_t dot = stem.find_last_of('.');
  bool attempt_like = dot != std::string::npos && dot + 1 < stem.size() &&
                      stem.find_first_not_of("0123456789", dot + 1) == std::string::npos;
  if (stem != name || attempt_like) stem += "@" + index;
  return stem;
}

std::string resolve_log_dir(const CommandSpec &spec) {
  if (!spec.log_dir.empty()) return spec.log_dir;
  if (const char *dir = std::getenv("GPUFLOW_LOG_DIR"); dir && *dir) return dir;
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/gpuflow-logs";
}

// The last few lines of a log, for the error message.
std::string log_tail(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  constexpr off_t kTail = 400;
  off_t end = ::lseek(fd, 0, SEEK_END);
  off_t from = end > kTail ? end - kTail : 0;
  std::string text(static_cast<size_t>(end - from), '\0');
  ssize_t got = ::pread(fd, text.data(), text.size(), from);
  ::close(fd);
  text.resize(got > 0 ? static_cast<size_t>(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (from > 0) {
    size_t nl = text.find('\n');
    text = nl == std::string::npos ? text : text.substr(nl + 1);
  }
  return text;
}

struct ChildState {
  gf_task_ctx *ctx = nullptr;
  uv_process_t process{};
  uv_timer_t timer{};
  Clock::time_point started;
  double timeout_s = 0;
  bool exited = false;
  int64_t exit_status = 0;
  int term_signal = 0;
  enum class Kill { kNone, kTimeout, kCancel } killed = Kill::kNone;
  Clock::time_point killed_at;
  bool sent_sigkill = false;
};

void kill_group(ChildState &s, int sig) {
  // The child leads its own process group (UV_PROCESS_DETACHED): shell pipelines die with it.
  if (::kill(-s.process.pid, sig) != 0) uv_process_kill(&s.process, sig);
}

void on_exit(uv_process_t *process, int64_t exit_status, int term_signal) {
  auto &s = *static_cast<ChildState *>(process->data);
  s.exited = true;
  s.exit_status = exit_status;
  s.term_signal = term_signal;
  uv_close(reinterpret_cast<uv_handle_t *>(&s.process), nullptr);
  uv_close(reinterpret_cast<uv_handle_t *>(&s.timer), nullptr);
}

void on_tick(uv_timer_t *timer) {
  auto &s = *static_cast<ChildState *>(timer->data);
  auto now = Clock::now();
  if (s.killed == ChildState::Kill::kNone) {
    if (gf_task_ctx_cancelled(s.ctx)) {
      s.killed = ChildState::Kill::kCancel;
    } else if (s.timeout_s > 0 && seconds_between(s.started, now) >= s.timeout_s) {
      s.killed = ChildState::Kill::kTimeout;
    } else {
      return;
    }
    s.killed_at = now;
    kill_group(s, SIGTERM);
  } else if (!s.sent_sigkill && seconds_between(s.killed_at, now) >= kKillGraceSeconds) {
    s.sent_sigkill = true;
    kill_group(s, SIGKILL);
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int fail_body(gf_task_ctx *ctx, const std::string &message) {
  gf_task_ctx_fail(ctx, message.c_str());
  return 1;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// The body of every command task: user_data is its CommandBodies::Task.
int run_command(gf_task_ctx *ctx, void *user_data) {
  const auto &task = *static_cast<const CommandBodies::Task *>(user_data);
  const CommandSpec &spec = *task.spec;
  gf_task_env env = GF_TASK_ENV_INIT;
  if (gf_status s = gf_task_ctx_env(&env, ctx); s != GF_OK) {
    return fail_body(ctx, std::string("cannot read its task environment: ") + gf_last_error());
  }

  // Where its output goes.
  std::string dir = resolve_log_dir(spec) + "/" + task.run->log_subdir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string stem = dir + "/" + task.log_stem;
  if (env.attempt > 1) stem.append(".").append(std::to_string(env.attempt));
  const std::string out_path = stem + ".out", err_path = stem + ".err";
  Fd out_fd{::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  Fd err_fd{::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (out_fd.fd < 0 || err_fd.fd < 0) {
    return fail_body(ctx,
                     "cannot create its log files " + stem + ".{out,err}: " + std::strerror(errno));
  }

  // Its environment: ours, less what we set, plus the device it was given.
  std::string visible, ordinal;
  if (env.kind == GF_WORKER_GPU && env.device >= 0) {
    ordinal = std::to_string(env.device);
    visible = task.run->visible_device(env.device);
  }
  std::vector<std::string> entries = spec.env;
  entries.push_back("CUDA_VISIBLE_DEVICES=" + visible);
  entries.push_back("GPUFLOW_DEVICES=" + ordinal);
  entries.push_back(std::string("GPUFLOW_TASK_NAME=") + (env.task_name ? env.task_name : ""));
  entries.push_back("GPUFLOW_ATTEMPT=" + std::to_string(env.attempt));
  std::vector<std::string> names;
  for (const auto &e : entries) names.push_back(env_name(e) + "=");
  std::vector<char *> envp;
  for (char **e = environ; e && *e; ++e) {
    bool overridden = false;
    for (const auto &n : names)
      overridden = overridden || std::strncmp(*e, n.data(), n.size()) == 0;
    if (!overridden) envp.push_back(*e);
  }
  for (auto &e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = spec.argv;
  std::vector<char *> argv;
  for (auto &a : argv_copy) argv.push_back(a.data());
  argv.push_back(nullptr);

  uv_loop_t loop;
  if (int rc = uv_loop_init(&loop); rc != 0) {
    return fail_body(ctx, std::string("cannot start an event loop: ") + uv_strerror(rc));
  }
  ChildState s;
  s.ctx = ctx;
  s.timeout_s = spec.timeout_s;
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = out_fd.fd;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = err_fd.fd;
  uv_process_options_t options{};
  options.exit_cb = on_exit;
  options.file = argv[0];
  options.args = argv.data();
  options.env = envp.data();
  options.cwd = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();
  options.flags = UV_PROCESS_DETACHED;
  options.stdio_count = 3;
  options.stdio = stdio;
  s.process.data = &s;
  s.timer.data = &s;
  s.started = Clock::now();
  int rc = uv_spawn(&loop, &s.process, &options);
  std::string result;
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t *>(&s.process), nullptr);
    result = "cannot start '" + spec.argv[0] + "'" +
             (spec.working_dir.empty() ? "" : " in '" + spec.working_dir + "'") + ": " +
             uv_strerror(rc);
  } else {
    uv_timer_init(&loop, &s.timer);
    uv_timer_start(&s.timer, on_tick, kPollMs, kPollMs);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (!result.empty()) return fail_body(ctx, result);

  const std::string prog = "'" + spec.argv[0] + "'";
  if (s.killed == ChildState::Kill::kTimeout) {
    return fail_body(ctx, "command " + prog + " timed out after " + format_seconds(spec.timeout_s) +
                              " s and was killed (logs: " + stem + ".{out,err})");
  }
  if (s.killed == ChildState::Kill::kCancel) {
    return fail_body(ctx, "cancelled; command " + prog + " was killed");
  }
  if (s.exit_status == 0 && s.term_signal == 0) return 0;
  std::string how = s.term_signal ? "was killed by signal " + std::to_string(s.term_signal) + " (" +
                                        strsignal(s.term_signal) + ")"
                                  : "exited with code " + std::to_string(s.exit_status);
  std::string tail = log_tail(err_path);
  return fail_body(ctx, "command " + prog + " " + how + " (stderr: " + err_path + ")" +
                            (tail.empty() ? "" : ": " + tail));
}

}  // namespace

std::string command_log_subdir(std::chrono::system_clock::time_point submitted, uint64_t pool,
                               uint64_t run) {
  std::time_t t = std::chrono::system_clock::to_time_t(submitted);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", &utc);
  return std::string("run-") + when + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(pool) + "." + std::to_string(run);
}

std::string CommandBodies::visible_device(int device) const {
  auto d = static_cast<size_t>(device);
  std::string uuid = device >= 0 && d < device_uuids_.size() ? device_uuids_[d] : std::string();
  return uuid.empty() ? std::to_string(device) : uuid;
}

TaskBody CommandBodies::resolve(const Graph &graph, uint32_t t) {
  const TaskDesc &desc = graph.task(t);
  Task &task = tasks_.emplace_back();
  task.spec = graph.command(desc);
  task.log_stem = log_stem(graph.task_name(desc), t);
  task.run = this;
  return desc.command_on_gpu ? TaskBody{nullptr, run_command, &task}
                             : TaskBody{run_command, nullptr, &task};
}

}  // namespace gf
