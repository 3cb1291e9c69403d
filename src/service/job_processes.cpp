#include "service/job_processes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gf::service::jobs {

namespace {

struct StatFields {
  char state = 0;
  int32_t process_group = 0;
  uint64_t start = 0;
  // A zombie has ended: it holds no device, only a pid until its parent reaps it.
  bool ended() const { return state == 'Z' || state == 'X' || state == 'x'; }
};

// /proc/PID/stat past the command name (which may hold spaces and parentheses): field 3 on.
bool read_stat(int32_t pid, StatFields &out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[1024];
  ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  const char *p = std::strrchr(text, ')');
  if (!p) return false;
  ++p;
  // Fields after the name: 3 state, 4 ppid, 5 pgrp, ... 22 starttime.
  char *end = nullptr;
  for (int field = 3; field <= 22; ++field) {
    while (*p == ' ') ++p;
    if (!*p) return false;
    if (field == 3) out.state = *p;
    if (field == 5) out.process_group = static_cast<int32_t>(std::strtol(p, &end, 10));
    if (field == 22) out.start = std::strtoull(p, &end, 10);
    while (*p && *p != ' ') ++p;
  }
  return true;
}

template <typename Visit>
void each_process(Visit visit) {
  DIR *dir = ::opendir("/proc");
  if (!dir) return;
  while (dirent *e = ::readdir(dir)) {
    char *end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    visit(static_cast<int32_t>(pid));
  }
  ::closedir(dir);
}

bool owner_of(int32_t pid, uint32_t &uid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d", pid);
  struct stat st {};
  if (::stat(path, &st) != 0) return false;
  uid = st.st_uid;
  return true;
}

}  // namespace

uint64_t start_time(uint32_t pid) {
  StatFields f;
  if (pid == 0 || !read_stat(static_cast<int32_t>(pid), f) || f.ended()) return 0;
  return f.start;
}

bool still_running(uint32_t pid, uint64_t start) {
  return pid != 0 && start != 0 && start_time(pid) == start;
}

bool group_alive(int32_t process_group) {
  if (process_group <= 1) return false;
  if (::kill(-process_group, 0) != 0 && errno == ESRCH) return false;
  // Members that are only zombies have ended. Where /proc hides other users' processes
  // (hidepid) and shows no member at all, the kernel's word stands.
  bool seen = false, running = false;
  each_process([&](int32_t pid) {
    StatFields f;
    if (running || !read_stat(pid, f) || f.process_group != process_group) return;
    seen = true;
    running = !f.ended();
  });
  return running || !seen;
}

std::vector<Member> group_members(int32_t process_group) {
  std::vector<Member> out;
  if (process_group <= 1) return out;
  each_process([&](int32_t pid) {
    StatFields f;
    Member m{pid, 0};
    if (read_stat(pid, f) && f.process_group == process_group && !f.ended() && owner_of(pid, m.uid))
      out.push_back(m);
  });
  return out;
}

Refusal bindable(int32_t process_group, uint32_t uid) {
  const std::string group = "process group " + std::to_string(process_group);
  auto refused = [](std::string why) { return Refusal{GF_ERR_INVALID_ARGUMENT, std::move(why)}; };
  if (process_group <= 1) return refused(group + " is not a process group a job can have");
  std::vector<Member> members = group_members(process_group);
  if (members.empty()) return refused(group + " has no process on the service's host");
  if (uid == 0) return {};
  for (const Member &m : members) {
    if (m.uid != uid) {
      return refused(group + " has process " + std::to_string(m.pid) + " of uid " +
                     std::to_string(m.uid) + ", not yours (uid " + std::to_string(uid) + ")");
    }
  }
  return {};
}

int signal_group(int32_t process_group, uint32_t uid, int sig) {
  int reached = 0;
  for (const Member &m : group_members(process_group)) {
    if (m.uid == uid && ::kill(m.pid, sig) == 0) ++reached;
  }
  return reached;
}

}  // namespace gf::service::jobs
