// Leases that own their jobs (docs/service.md, "A lease owns its job"). A holder binds a process
// group to its lease (LeaseBind); when the holder goes without releasing it (killed), or when the
// service restarts while jobs run, the lease is not returned to the book: it passes to a *keeper*
// (a client of the book with the job's user, so fair share goes on counting it) and stays held
// until no process of its group is left and its holder process, where known, has ended. An
// orphaned group (its holder gone) is asked to end: SIGTERM at once, SIGKILL after the grace
// period, to the group's processes of the job's user only. Where the service holds a delegated
// cgroup subtree (job_cgroups.hpp), a bound job is its own cgroup instead: it runs while the cgroup
// is populated, and ending it signals, then kills, the whole cgroup, whoever left the group.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/refusal.hpp"
#include "service/job_cgroups.hpp"
#include "service/job_processes.hpp"
#include "service/lease_book.hpp"

namespace gf::service {

class JobKeeper {
 public:
  // `new_client` gives the id of each keeper client; `log` takes one line per decision.
  JobKeeper(LeaseBook &book, double grace_s, std::function<ClientId()> new_client,
            std::function<void(const std::string &)> log);

  // Jobs bound from now on run in cgroups under `cgroups` (nothing: process groups only). `why`
  // says why not when there are none, for status and gpuflow doctor.
  void use_cgroups(std::optional<JobCgroups> cgroups, std::string why);
  // How jobs are followed, in words: "cgroups under ROOT" or "process groups (why)".
  std::string tracking() const;

  // Binds `group` to `lease` for `client` (of `uid`). No refusal, or GF_ERR_INVALID_ARGUMENT and
  // why not (not its lease, no such group, another user's processes in it).
  Refusal bind(ClientId client, uint32_t uid, LeaseId lease, int32_t group);
  int32_t group_of(LeaseId lease) const;  // 0: none bound
  // Whether a saved lease's job still runs: its cgroup populated, else its group alive.
  bool job_alive(LeaseId lease, int32_t group) const;

  // `client` goes (call before LeaseBook::remove_client): each of its leases whose group still
  // has processes passes to a keeper, and the group is told to end. How many were kept.
  size_t holder_gone(ClientId client, const HolderProcess &holder, double now);
  // A lease of a saved book (before a restart) whose holder or group is still there: added to
  // the book under a keeper. Throws gf::Error when the book refuses it (LeaseBook::restore).
  void keep_restored(Lease lease, const HolderProcess &holder, int32_t group, double now);

  // `client`, a new connection of the process that held `lease` before the service restarted
  // (`holder`: its pid, start time and user), takes the kept lease back: from now on it is an
  // ordinary lease of that client again (its bound group, if any, stays bound). No refusal, or
  // GF_ERR_NOT_FOUND and why not (no such lease kept, or kept for another process).
  Refusal hand_back(LeaseId lease, ClientId client, const HolderProcess &holder, double now);

  // Ends kept leases whose processes have all gone, and sends SIGKILL to orphaned groups past
  // the grace period. True when a lease ended (the caller schedules).
  bool watch(double now);
  // A lease ended the ordinary way (or was released by a privileged client): its binding, or its
  // keeper, goes.
  void forget(LeaseId lease);
  // Something for watch() to look at: kept leases, or cgroups of ended ones not yet removed.
  bool keeping() const { return !kept_.empty() || !draining_.empty(); }

  // The kept leases, for status and the saved book: their keeper, who held them, their group.
  struct KeptView {
    LeaseId lease = 0;
    ClientId keeper = 0;
    HolderProcess holder;
    int32_t group = 0;
  };
  std::vector<KeptView> kept() const;

 private:
  struct Bound {
    int32_t group = 0;
    uint32_t uid = 0;
    std::string cgroup;  // the job's cgroup; empty: its process group only
  };
  struct Kept {
    ClientId keeper = 0;
    HolderProcess holder;
    bool holder_running = false;  // the holder's process is still the one that held the lease
    Bound job;
    double orphaned_at = -1;  // when SIGTERM went (-1: not yet)
    bool killed = false;      // SIGKILL went
  };
  // A client of the book that holds leases for `holder`'s jobs (its user, so fair share counts).
  ClientId add_keeper(const HolderProcess &holder, const std::string &why, double now);
  void orphan(LeaseId lease, Kept &k, double now);
  bool alive(const Bound &job) const;
  int signal(const Bound &job, int sig) const;
  std::string job_text(const Bound &job) const;
  // The job's cgroup goes once empty: now, or from a later watch().
  void drop_cgroup(const Bound &job);

  LeaseBook &book_;
  double grace_s_;
  std::function<ClientId()> new_client_;
  std::function<void(const std::string &)> log_;
  std::map<LeaseId, Bound> bound_;
  std::map<LeaseId, Kept> kept_;
  std::optional<JobCgroups> cgroups_;
  std::string no_cgroups_why_ = "not looked for";
  std::vector<std::string> draining_;  // cgroups of ended leases, removed once empty
};

}  // namespace gf::service
