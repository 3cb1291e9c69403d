#include "per_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "exit_codes.hpp"

namespace gpuflow_cli {

namespace {

std::string env_or(const char *name, const std::string &otherwise) {
  const char *value = std::getenv(name);
  return value && *value ? value : otherwise;
}

// Where daemon_ready writes, in the child of daemonize; -1 elsewhere.
int ready_fd = -1;

void write_all(int fd, const std::string &text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone: nobody is left to tell
    done += static_cast<size_t>(n);
  }
}

}  // namespace

JobPlace job_place() {
  const std::string id = env_or("SLURM_JOB_ID", "");
  if (id.empty())
    throw std::runtime_error(
        "--per-job: SLURM_JOB_ID is not set, so this is not inside a batch job; give --socket "
        "PATH instead");
  // Slurm's ids are digits (an array task's own job id too); anything else would make a path.
  if (id.find_first_not_of("0123456789_") != std::string::npos || id.size() > 32)
    throw std::runtime_error("--per-job: SLURM_JOB_ID '" + id +
                             "' is not a job id (digits expected)");
  JobPlace place;
  place.job_id = id;
  place.dir = env_or("SLURM_TMPDIR", env_or("TMPDIR", "/tmp")) + "/gpuflow-job-" + id;
  place.socket = place.dir + "/gpuflow.sock";
  return place;
}

void make_job_dir(const std::string &dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) return;
  const int made = errno;
  struct stat st {};
  if (made != EEXIST || ::lstat(dir.c_str(), &st) != 0)
    throw std::runtime_error("--per-job: cannot create " + dir + ": " + std::strerror(made));
  // Another user's directory at this path could take the socket: refuse it rather than use it.
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 0077) != 0)
    throw std::runtime_error("--per-job: " + dir +
                             " exists but is not a directory of this user that only it may "
                             "enter (mode 0700): refusing to listen there");
}

pid_t job_process() {
  return ::getpgrp() != ::getpid() ? ::getpgrp() : ::getppid();
}

void stop_when_gone(pid_t pid, const char *who) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0 && errno != ESRCH)
    throw std::runtime_error("--per-job: cannot watch " + std::string(who) + " (pid " +
                             std::to_string(pid) + "): " + std::strerror(errno));
  std::thread([fd, pid, who] {
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
      }
      ::close(fd);
    }
    std::fprintf(stderr, "gpuflow serve: %s (pid %d) has ended: the job is over\n", who,
                 static_cast<int>(pid));
    std::fflush(stderr);
    ::kill(::getpid(), SIGTERM);
  }).detach();
}

int daemonize() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "gpuflow serve: --daemon: pipe: %s\n", std::strerror(errno));
    return kExitError;
  }
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "gpuflow serve: --daemon: fork: %s\n", std::strerror(errno));
    return kExitError;
  }
  if (child == 0) {
    ::close(fds[0]);
    ready_fd = fds[1];
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    return -1;
  }
  ::close(fds[1]);
  std::string text;
  char buffer[512];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (text.empty()) {
    // It ended (or closed the pipe) before it listened, and said why on stderr.
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) return WEXITSTATUS(status);
    return kExitError;
  }
  std::fputs(text.c_str(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitError;
}

void daemon_ready(const std::string &lines) {
  if (ready_fd < 0) return;
  write_all(ready_fd, lines);
  ::close(ready_fd);
  ready_fd = -1;
}

std::string shell_export(const std::string &name, const std::string &value) {
  std::string quoted = "'";
  for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return name + "=" + quoted + "'; export " + name;
}

}  // namespace gpuflow_cli
