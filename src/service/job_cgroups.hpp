// Jobs as cgroups, where the service holds a delegated cgroup v2 subtree (docs/service.md, "A
// lease owns its job"): each bound lease's job in a cgroup of its own under that root, so a
// process that leaves its process group (setsid, a double fork) stays in the job, the job is
// over when the cgroup is empty (cgroup.events) and ending it kills the cgroup (cgroup.kill).
// Without a delegated root the keeper goes on with process groups. Linux only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace gf::service {

class JobCgroups {
 public:
  // The subtree to use: `configured` (a cgroup v2 directory; gpuflow serve --cgroup-root), else
  // the service's own cgroup when systemd delegated it (Delegate=yes marks it with the xattr
  // trusted.delegate). The service moves itself into ROOT/service when it lives in ROOT itself,
  // so ROOT holds no processes of its own (cgroup v2 allows controllers only on cgroups without
  // processes). Nothing, with `why` saying so, when there is none or it cannot be written; a
  // configured root that cannot be used sets `why` too, for the log.
  static std::optional<JobCgroups> open(const std::string &configured, std::string &why);

  const std::string &root() const { return root_; }
  // Processes a service before this one left in ROOT/service, killed at open (systemd's unit
  // stops only the service's own process: KillMode=process, so that the jobs outlive it).
  int leftovers_killed() const { return leftovers_killed_; }
  // ROOT/lease-ID: where the lease's job runs.
  std::string path_of(uint64_t lease) const;
  // Makes the lease's cgroup (an existing one is reused) and moves `pid` into it. Empty, or why
  // not.
  std::string adopt(uint64_t lease, pid_t pid) const;

 private:
  explicit JobCgroups(std::string root) : root_(std::move(root)) {}
  std::string root_;
  int leftovers_killed_ = 0;
};

namespace cgroups {

// The cgroup (a directory) still holds a process: cgroup.events says "populated 1". A missing
// cgroup holds none.
bool populated(const std::string &cgroup);
// Sends `sig` to every process in the cgroup; how many it reached.
int signal_all(const std::string &cgroup, int sig);
// Kills every process in the cgroup and its descendants at once (cgroup.kill, Linux 5.14);
// where the kernel has no cgroup.kill, SIGKILL to each process listed. How many were listed.
int kill_all(const std::string &cgroup);
// Removes the cgroup once empty; false while it still holds processes (or cannot go).
bool remove(const std::string &cgroup);

}  // namespace cgroups

}  // namespace gf::service
