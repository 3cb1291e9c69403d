#include "service/job_cgroups.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace gf::service {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// Writes `text` to a cgroup's control file; empty, or why not.
std::string write_control(const std::string &file, const std::string &text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return file + ": " + errno_text();
  const ssize_t n = ::write(fd, text.data(), text.size());
  const std::string why = n == static_cast<ssize_t>(text.size()) ? "" : file + ": " + errno_text();
  ::close(fd);
  return why;
}

bool is_cgroup2(const std::string &dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

// Where the cgroup v2 hierarchy is mounted ("/sys/fs/cgroup"; "/sys/fs/cgroup/unified" on a
// hybrid system); empty when it is not.
std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    // ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3)), head(line.substr(0, dash));
    std::string type, id, parent, dev, root, mount;
    tail >> type;
    head >> id >> parent >> dev >> root >> mount;
    if (type == "cgroup2") return mount;
  }
  return {};
}

// The service's own cgroup v2 directory; empty when it has none.
std::string own_cgroup(const std::string &mount) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) return mount + (line.size() > 4 ? line.substr(3) : "");
  }
  return {};
}

bool delegated(const std::string &dir) {
  for (const char *name : {"trusted.delegate", "user.delegate"}) {
    char value[8] = {};
    if (::getxattr(dir.c_str(), name, value, sizeof value - 1) > 0 && value[0] == '1') return true;
  }
  return false;
}

std::vector<pid_t> procs_of(const std::string &cgroup) {
  std::ifstream in(cgroup + "/cgroup.procs");
  std::vector<pid_t> out;
  for (long pid = 0; in >> pid;) out.push_back(static_cast<pid_t>(pid));
  return out;
}

}  // namespace

std::optional<JobCgroups> JobCgroups::open(const std::string &configured, std::string &why) {
  int leftovers = 0;
  const std::string mount = cgroup2_mount();
  const std::string own = mount.empty() ? "" : own_cgroup(mount);
  std::string root = configured;
  if (root.empty()) {
    if (mount.empty()) {
      why = "no cgroup v2 hierarchy is mounted";
      return std::nullopt;
    }
    if (own.empty() || !delegated(own)) {
      why = "the service's cgroup (" + (own.empty() ? std::string("none") : own) +
            ") was not delegated to it (systemd: Delegate=yes; elsewhere: cgroup_root)";
      return std::nullopt;
    }
    root = own;
  }
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (!is_cgroup2(root)) {
    why = "cgroup_root " + root + " is not a directory of a cgroup v2 hierarchy";
    return std::nullopt;
  }
  if (::access((root + "/cgroup.procs").c_str(), W_OK) != 0) {
    why = "cgroup_root " + root + " cannot be written: " + errno_text();
    return std::nullopt;
  }
  if (root == own) {
    // No internal processes: the service leaves ROOT for a leaf of its own, so the jobs' cgroups
    // beside it may have controllers enabled.
    const std::string leaf = root + "/service";
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
      why = "cannot make " + leaf + ": " + errno_text();
      return std::nullopt;
    }
    // In a unit's delegated cgroup, what is there is a killed service's (relays, graphs'
    // commands), never a live one's: the service is the unit's main process, and systemd starts
    // the next only once it is gone. The jobs are in lease-ID beside it and stay.
    if (configured.empty() && cgroups::populated(leaf)) leftovers = cgroups::kill_all(leaf);
    if (std::string e = write_control(leaf + "/cgroup.procs", std::to_string(::getpid()));
        !e.empty()) {
      why = "cannot move the service into " + leaf + ": " + e;
      return std::nullopt;
    }
  }
  JobCgroups opened(root);
  opened.leftovers_killed_ = leftovers;
  return opened;
}

std::string JobCgroups::path_of(uint64_t lease) const {
  return root_ + "/lease-" + std::to_string(lease);
}

std::string JobCgroups::adopt(uint64_t lease, pid_t pid) const {
  const std::string dir = path_of(lease);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return "cannot make " + dir + ": " + errno_text();
  return write_control(dir + "/cgroup.procs", std::to_string(pid));
}

namespace cgroups {

bool populated(const std::string &cgroup) {
  std::ifstream in(cgroup + "/cgroup.events");
  for (std::string key, value; in >> key >> value;) {
    if (key == "populated") return value != "0";
  }
  return false;
}

int signal_all(const std::string &cgroup, int sig) {
  int reached = 0;
  for (pid_t pid : procs_of(cgroup)) reached += ::kill(pid, sig) == 0 ? 1 : 0;
  return reached;
}

int kill_all(const std::string &cgroup) {
  const std::vector<pid_t> listed = procs_of(cgroup);
  if (!write_control(cgroup + "/cgroup.kill", "1").empty()) {
    for (pid_t pid : listed) ::kill(pid, SIGKILL);  // a kernel before 5.14
  }
  return static_cast<int>(listed.size());
}

bool remove(const std::string &cgroup) {
  return ::rmdir(cgroup.c_str()) == 0 || errno == ENOENT;
}

}  // namespace cgroups

}  // namespace gf::service
