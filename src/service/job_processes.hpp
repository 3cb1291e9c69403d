// What the service knows of a lease's processes on this host, read from /proc: whether a process
// is still the one that connected (pid and start time), whether a process group has members, and
// signals to the members of one user. Linux only, like the rest of the service.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/refusal.hpp"

namespace gf::service {

// A process that held (or holds) leases: the pid with its start time names it for good.
struct HolderProcess {
  uint32_t pid = 0;
  uint64_t start = 0;  // jobs::start_time; 0: unknown (then it counts as gone)
  uint32_t uid = 0;
  std::string user;
  std::string name;  // the client's name
};

}  // namespace gf::service

namespace gf::service::jobs {

// When the process started (clock ticks since boot, /proc/PID/stat field 22); 0 when there is
// no such process (or only its zombie). With the pid it names one process for good: pids are
// reused, start times with them are not.
uint64_t start_time(uint32_t pid);
// The process `pid` that started at `start` still runs (a zombie has ended: it holds nothing).
bool still_running(uint32_t pid, uint64_t start);

// The group has a member that has not ended, of whatever user. A group id is not reused while
// the group has members.
bool group_alive(int32_t process_group);

struct Member {
  int32_t pid = 0;
  uint32_t uid = 0;  // the owner of /proc/PID: the process's effective uid
};
// The processes of the group now, zombies left out (a scan of /proc).
std::vector<Member> group_members(int32_t process_group);

// Whether a client of `uid` may bind `process_group` to a lease: refused (GF_ERR_INVALID_ARGUMENT)
// when it has no members, or one of them is another user's (root may bind any).
Refusal bindable(int32_t process_group, uint32_t uid);

// Sends `sig` to the group's members owned by `uid`; how many it reached.
int signal_group(int32_t process_group, uint32_t uid, int sig);

}  // namespace gf::service::jobs
