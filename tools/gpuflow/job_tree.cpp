#include "job_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace gpuflow_cli {

namespace {

// The stop signals reach run_job through this pipe while COMMAND runs; before it was let go and
// after its job ended, they end the process (see take_job_signals). The phase changes under the
// mutex, together with what makes it true (COMMAND let go), so a signal is never taken for one
// phase while the other begins: it finds either a COMMAND that will never run, or a run_job that
// will read the pipe.
int stop_pipe[2] = {-1, -1};
enum class Phase { kBefore, kRunning, kAfter };
std::mutex phase_mu;
Phase phase = Phase::kBefore;  // under phase_mu

sigset_t job_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
  return set;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What execvp would run, looked up before fork: the child may only make async-signal-safe calls.
std::string resolve(const std::string &command, int &error) {
  error = 0;
  if (command.find('/') != std::string::npos) return command;
  const char *path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  error = ENOENT;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + command;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) {
        error = 0;
        return candidate;
      }
      error = EACCES;
    }
    start = end + 1;
  }
  return command;
}

// Every descendant of this process, by parent links in /proc. This process is their subreaper,
// so a process whose parent died is still found (its parent is now this one).
std::vector<pid_t> descendants() {
  std::map<pid_t, std::vector<pid_t>> children;
  DIR *dir = ::opendir("/proc");
  if (!dir) return {};
  while (dirent *e = ::readdir(dir)) {
    char *end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char text[512];
    ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (n <= 0) continue;
    text[n] = '\0';
    const char *p = std::strrchr(text, ')');  // the name may hold anything
    if (!p) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(p + 1, " %c %ld", &state, &ppid) != 2) continue;
    children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(pid));
  }
  ::closedir(dir);
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {::getpid()};
  while (!todo.empty()) {
    pid_t parent = todo.back();
    todo.pop_back();
    for (pid_t child : children[parent]) {
      out.push_back(child);
      todo.push_back(child);
    }
  }
  return out;
}

// The whole job: its process group at once, then every descendant that left the group.
void signal_job(pid_t group, int sig) {
  ::kill(-group, sig);
  for (pid_t pid : descendants()) ::kill(pid, sig);
}

// The terminal this process has in the foreground, if any (-1: none).
int foreground_terminal() {
  if (!::isatty(STDIN_FILENO)) return -1;
  return ::tcgetpgrp(STDIN_FILENO) == ::getpgrp() ? STDIN_FILENO : -1;
}

// Gives the terminal to `group` without being stopped for it (SIGTTOU comes to a background
// caller).
// (Async-signal-safe: the child calls it between fork and exec.)
void give_terminal(int tty, pid_t group) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(tty, group);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

// The child between fork and exec: only async-signal-safe calls.
[[noreturn]] void become_command(const char *path, char *const *argv, char *const *envp, int go,
                                 int report, int tty, pid_t parent) {
  ::setpgid(0, 0);
  if (tty >= 0) give_terminal(tty, ::getpid());
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) _exit(127);  // the wrapper died before the line above
  char byte = 0;
  ssize_t n;
  do {
    n = ::read(go, &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);  // the wrapper gave up on it (the lease could not be bound)
  struct sigaction plain {};
  plain.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &plain, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  int e = errno;
  (void)!::write(report, &e, sizeof e);
  _exit(127);
}

}  // namespace

void take_job_signals() {
  sigset_t set = job_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (::pipe2(stop_pipe, O_CLOEXEC) != 0) return;
  std::thread([] {
    sigset_t stops;
    sigemptyset(&stops);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, sig);
    for (;;) {
      int sig = 0;
      if (sigwait(&stops, &sig) != 0) continue;
      std::lock_guard lock(phase_mu);
      if (phase != Phase::kRunning) {
        // Nothing runs under the lease (not yet, or no more): the lease goes back with the
        // connection, which ends with the process. Whatever this process still waited for (the
        // service's answer to the binding, the release) is of no use to anyone now.
        std::fprintf(stderr, "gpuflow: %s %s\n", strsignal(sig),
                     phase == Phase::kBefore ? "before the command started"
                                             : "after the command ended: exiting");
        _exit(128 + sig);
      }
      (void)!::write(stop_pipe[1], &sig, sizeof sig);
    }
  }).detach();
}

int run_job(const JobSpec &spec, std::string &error) {
  int lookup_error = 0;
  const std::string path = resolve(spec.argv.at(0), lookup_error);
  if (lookup_error) {
    error = "cannot run '" + spec.argv[0] + "': " + std::strerror(lookup_error);
    return -1;
  }
  std::vector<char *> argv, envp;
  std::vector<std::string> args = spec.argv, env = spec.env;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  // Orphans of the job come back to this process, not to init: it can wait for all of them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t child_signal;
  sigemptyset(&child_signal);
  sigaddset(&child_signal, SIGCHLD);
  int children = ::signalfd(-1, &child_signal, SFD_CLOEXEC | SFD_NONBLOCK);
  int go[2], report[2];
  if (children < 0 || ::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    error = std::string("cannot set up the job: ") + std::strerror(errno);
    return -1;
  }
  const int tty = foreground_terminal();
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    error = std::string("cannot start the job: fork: ") + std::strerror(errno);
    return -1;
  }
  if (child == 0)
    become_command(path.c_str(), argv.data(), envp.data(), go[0], report[1], tty, parent);
  ::close(go[0]);
  ::close(report[1]);
  ::setpgid(child, child);  // as the child does: whichever runs first, the group exists
  if (tty >= 0) give_terminal(tty, child);
  try {
    if (spec.started) spec.started(child);
  } catch (...) {
    ::close(go[1]);  // the child exits without running COMMAND
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (tty >= 0) give_terminal(tty, ::getpgrp());
    throw;
  }
  {
    // Let go and running in one step: a stop signal before it ends this process, and the child
    // then reads end-of-file instead of 'g' and never runs COMMAND.
    std::lock_guard lock(phase_mu);
    char byte = 'g';
    (void)!::write(go[1], &byte, 1);
    ::close(go[1]);
    phase = Phase::kRunning;
  }
  int exec_error = 0;
  ssize_t got;
  do {
    got = ::read(report[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);

  int status = 0;
  bool command_ended = false;
  double kill_at = -1;  // when what is left gets SIGKILL (-1: not decided)
  // A stopped process acts on no signal but SIGKILL until it is continued: without the SIGCONT,
  // a job stopped by SIGSTOP (or one stopped at the terminal) would sit out the whole grace.
  auto end_the_rest = [&](int sig) {
    signal_job(child, sig);
    signal_job(child, SIGCONT);
    if (kill_at < 0) kill_at = now_s() + spec.grace_s;
  };
  for (;;) {
    // Reap whatever ended; ECHILD means no process of the job is left.
    bool empty = false;
    for (;;) {
      int s = 0;
      pid_t pid = ::waitpid(-1, &s, WNOHANG | WUNTRACED);
      if (pid == child && WIFSTOPPED(s) && tty >= 0) {
        // Ctrl-Z stopped COMMAND: stop here too, so the shell gets its terminal back; on `fg`
        // the job gets it again and goes on. Without a terminal no shell waits for that: a
        // wrapper that stopped itself would stay stopped, deaf to every stop signal, after
        // whoever stopped the job continued it.
        give_terminal(tty, ::getpgrp());
        ::raise(SIGSTOP);
        give_terminal(tty, child);
        ::kill(-child, SIGCONT);
        continue;
      }
      if (pid > 0 && WIFSTOPPED(s)) continue;  // stopped from outside: whoever did continues it
      if (pid == child) {
        status = s;
        command_ended = true;
        end_the_rest(SIGTERM);  // what COMMAND left behind ends with it
      } else if (pid == 0) {
        break;
      } else if (pid < 0) {
        empty = errno == ECHILD;
        break;
      }
    }
    if (empty) break;
    if (kill_at >= 0 && now_s() >= kill_at) {
      signal_job(child, SIGKILL);
      kill_at = now_s() + 0.1;  // and again while anything is left (it may have forked)
    }
    pollfd fds[2] = {{children, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
    int wait_ms = kill_at < 0 ? -1 : static_cast<int>(std::max(0.0, kill_at - now_s()) * 1000) + 1;
    if (::poll(fds, stop_pipe[0] >= 0 ? 2 : 1, wait_ms) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(children, &info, sizeof info) > 0) {
      }
    }
    if (stop_pipe[0] >= 0 && (fds[1].revents & POLLIN)) {
      int sig = 0;
      if (::read(stop_pipe[0], &sig, sizeof sig) == sizeof sig) {
        if (sig == SIGINT && !command_ended) {
          signal_job(child, SIGINT);  // like Ctrl-C: COMMAND decides what it means
        } else {
          end_the_rest(sig);
        }
      }
    }
  }
  {
    std::lock_guard lock(phase_mu);
    phase = Phase::kAfter;
  }
  ::close(children);
  if (tty >= 0) give_terminal(tty, ::getpgrp());
  if (got == sizeof exec_error && exec_error != 0) {
    error = "cannot run '" + spec.argv[0] + "': " + std::strerror(exec_error);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 2;
}

}  // namespace gpuflow_cli
