// Processes for the service's multi-process tests: a temporary directory per test, child
// processes with piped standard input and output, `gpuflow serve` on emulated devices, and the
// gpuflow command run to its end. Header-only, included by each test file of tests/service.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

extern char **environ;

namespace gfsvc {

constexpr int kTimeFactor = GPUFLOW_TEST_TIME_FACTOR;

inline int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

inline int64_t ms_since(int64_t start_ns) {
  return (now_ns() - start_ns) / 1000000;
}

inline bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

inline std::vector<std::string> words(const std::string &line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A fresh directory for one test's socket, logs and records; removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/gfsvc-XXXXXX";
    if (!mkdtemp(name)) throw std::runtime_error("mkdtemp failed");
    path_ = name;
    ::chmod(path_.c_str(), 0755);  // so a process of another uid reaches the socket itself
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A child process with its standard input and output on pipes and its standard error in a file.
class Proc {
 public:
  Proc(std::vector<std::string> argv, const std::string &stderr_path,
       std::vector<std::string> extra_env = {}) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) env.emplace_back(*e);
    for (auto &e : extra_env) env.push_back(e);
    std::vector<char *> args, envp;
    for (auto &a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto &e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    // SIGPIPE back to its default: this process ignores it, and children would inherit that.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawn(&pid_, args[0], &actions, &attributes, args.data(), envp.data());
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
    stderr_path_ = stderr_path;
  }
  ~Proc() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdin_ >= 0) ::close(stdin_);
    ::close(stdout_);
  }
  Proc(const Proc &) = delete;
  Proc &operator=(const Proc &) = delete;

  pid_t pid() const { return pid_; }
  bool exited() const { return exited_; }

  // The next line of its output, waiting at most timeout_ms; nullopt on timeout or end.
  std::optional<std::string> line(int timeout_ms) {
    const int64_t deadline = now_ns() + int64_t{timeout_ms} * 1000000;
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return l;
      }
      const int64_t left_ms = (deadline - now_ns()) / 1000000;
      if (left_ms <= 0) return std::nullopt;
      pollfd p{stdout_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left_ms)) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::read(stdout_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }
  // Waits for a line starting with `prefix` (skipping others); "" when none came in time.
  std::string expect(const std::string &prefix, int timeout_ms) {
    const int64_t start = now_ns();
    for (;;) {
      const int left = timeout_ms - static_cast<int>(ms_since(start));
      std::optional<std::string> l = line(std::max(left, 0));
      if (!l) return {};
      if (l->rfind(prefix, 0) == 0) return *l;
      seen_ += *l + "\n";
    }
  }
  void write(const std::string &text) {
    if (::write(stdin_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      ADD_FAILURE() << "writing to pid " << pid_ << ": " << std::strerror(errno);
    }
  }
  void close_stdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  // Its wait status, or nullopt if it is still running after timeout_ms.
  std::optional<int> wait(int timeout_ms) {
    const int64_t start = now_ns();
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return status;
      }
      if (ms_since(start) > timeout_ms) return std::nullopt;
      ::usleep(2000);
    }
  }
  std::string stderr_text() const {
    std::ifstream in(stderr_path_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // What it printed that expect() skipped, and its standard error: for failure messages.
  std::string story() const { return "stdout:\n" + seen_ + buffer_ + "stderr:\n" + stderr_text(); }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1;
  std::string buffer_, seen_, stderr_path_;
  bool exited_ = false;
};

inline std::string exit_text(std::optional<int> status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return "exit " + std::to_string(WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) return std::string("signal ") + strsignal(WTERMSIG(*status));
  return "status " + std::to_string(*status);
}

// `gpuflow serve` on emulated devices, on a socket in `dir`.
class Service {
 public:
  Service(const TempDir &dir, int devices, std::vector<std::string> extra = {},
          const std::string &log_name = "serve.log")
      : socket_(dir / "gf.sock"), log_(dir / log_name) {
    std::vector<std::string> argv = {GPUFLOW_CLI_PATH,
                                     "serve",
                                     "--backend",
                                     "host",
                                     "--emulated-devices",
                                     std::to_string(devices),
                                     "--emulated-device-memory",
                                     "256M",
                                     "--cpu-workers",
                                     "4",
                                     "--socket",
                                     socket_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc_ = std::make_unique<Proc>(argv, log_);
    listening_ = proc_->expect("gpuflow serve: listening on", 20000 * kTimeFactor);
  }
  // A sanitizer report in the service fails the test even where nothing else noticed it.
  // So does a service that ended when the test did not end it.
  ~Service() {
    const std::string text = log();
    EXPECT_FALSE(contains(text, "Sanitizer")) << text;
    if (!proc_->exited()) {
      std::optional<int> status = proc_->wait(0);
      EXPECT_FALSE(status) << "the service ended by itself: " << exit_text(status) << "\n" << text;
    }
  }
  Service(const Service &) = delete;
  Service &operator=(const Service &) = delete;
  bool ready() const { return !listening_.empty(); }
  std::string endpoint() const { return "unix://" + socket_; }
  const std::string &socket() const { return socket_; }
  Proc &proc() { return *proc_; }
  std::string log() const { return proc_->stderr_text(); }

 private:
  std::string socket_, log_, listening_;
  std::unique_ptr<Proc> proc_;
};

// The inodes of a process's sockets ("socket:[N]" in /proc/PID/fd), to find them in /proc/net.
inline std::set<std::string> socket_inodes_of(pid_t pid) {
  std::set<std::string> out;
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(fds, ec)) {
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) out.insert(target.substr(8, target.size() - 9));
  }
  return out;
}

// Runs the gpuflow command to its end: (exit status, standard output).
inline std::pair<int, std::string> run_cli(const TempDir &dir, std::vector<std::string> args) {
  static int calls = 0;
  args.insert(args.begin(), GPUFLOW_CLI_PATH);
  Proc p(args, dir / ("cli" + std::to_string(++calls) + ".err"));
  std::string out;
  while (std::optional<std::string> l = p.line(30000 * kTimeFactor)) out += *l + "\n";
  std::optional<int> status = p.wait(30000 * kTimeFactor);
  return {status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, out + p.stderr_text()};
}

}  // namespace gfsvc
