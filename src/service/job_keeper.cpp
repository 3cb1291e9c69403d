#include "service/job_keeper.hpp"

#include <signal.h>

#include "service/job_processes.hpp"

namespace gf::service {

JobKeeper::JobKeeper(LeaseBook &book, double grace_s, std::function<ClientId()> new_client,
                     std::function<void(const std::string &)> log)
    : book_(book), grace_s_(grace_s), new_client_(std::move(new_client)), log_(std::move(log)) {}

void JobKeeper::use_cgroups(std::optional<JobCgroups> cgroups, std::string why) {
  cgroups_ = std::move(cgroups);
  no_cgroups_why_ = std::move(why);
}

std::string JobKeeper::tracking() const {
  return cgroups_ ? "cgroups under " + cgroups_->root()
                  : "process groups (" + no_cgroups_why_ + ")";
}

Refusal JobKeeper::bind(ClientId client, uint32_t uid, LeaseId lease, int32_t group) {
  const Lease *l = book_.lease(lease);
  if (!l || l->client != client) {
    return {GF_ERR_INVALID_ARGUMENT, "no lease " + std::to_string(lease) + " of yours"};
  }
  if (Refusal refused = jobs::bindable(group, uid)) return refused;
  Bound job{group, uid, {}};
  if (cgroups_) {
    // The group's members are the holder's (bindable checked their owner); moved before the job
    // runs (gpuflow lease binds before COMMAND execs), everything they start is born in it.
    std::string failed;
    for (const jobs::Member &m : jobs::group_members(group)) {
      if (failed.empty()) failed = cgroups_->adopt(lease, m.pid);
    }
    if (failed.empty()) {
      job.cgroup = cgroups_->path_of(lease);
    } else {
      log_("lease " + std::to_string(lease) +
           ": its job is followed by its process group only: " + failed);
      draining_.push_back(cgroups_->path_of(lease));  // whatever did move in, once it ends
    }
  }
  bound_[lease] = job;
  return {};
}

bool JobKeeper::job_alive(LeaseId lease, int32_t group) const {
  if (cgroups_ && cgroups::populated(cgroups_->path_of(lease))) return true;
  return group != 0 && jobs::group_alive(group);
}

bool JobKeeper::alive(const Bound &job) const {
  if (!job.cgroup.empty()) return cgroups::populated(job.cgroup);
  return job.group != 0 && jobs::group_alive(job.group);
}

int JobKeeper::signal(const Bound &job, int sig) const {
  if (job.cgroup.empty()) return jobs::signal_group(job.group, job.uid, sig);
  return sig == SIGKILL ? cgroups::kill_all(job.cgroup) : cgroups::signal_all(job.cgroup, sig);
}

std::string JobKeeper::job_text(const Bound &job) const {
  return "process group " + std::to_string(job.group) +
         (job.cgroup.empty() ? "" : " (cgroup " + job.cgroup + ")");
}

void JobKeeper::drop_cgroup(const Bound &job) {
  if (!job.cgroup.empty() && !cgroups::remove(job.cgroup)) draining_.push_back(job.cgroup);
}

int32_t JobKeeper::group_of(LeaseId lease) const {
  auto it = bound_.find(lease);
  return it == bound_.end() ? 0 : it->second.group;
}

size_t JobKeeper::holder_gone(ClientId client, const HolderProcess &holder, double now) {
  size_t kept = 0;
  for (const Lease &l : book_.leases()) {
    if (l.client != client) continue;
    auto b = bound_.find(l.id);
    if (b == bound_.end()) continue;
    const Bound job = b->second;
    bound_.erase(b);
    if (!alive(job)) {
      drop_cgroup(job);
      continue;
    }
    Kept k;
    k.keeper = add_keeper(holder, "its holder went", now);
    k.job = job;
    // The holder dropped its connection: whether or not its process lives on, the lease has no
    // holder any more, so its job is an orphan.
    k.holder = holder;
    k.holder_running = false;
    book_.hand_over(l.id, k.keeper, now);
    log_("lease " + std::to_string(l.id) + " stays held for " + job_text(job) +
         ", which still runs after its holder (pid " + std::to_string(holder.pid) + ") went");
    auto [it, fresh] = kept_.emplace(l.id, std::move(k));
    orphan(l.id, it->second, now);
    ++kept;
  }
  return kept;
}

void JobKeeper::keep_restored(Lease lease, const HolderProcess &holder, int32_t group, double now) {
  Kept k;
  k.keeper = add_keeper(holder, "from before a restart", now);
  k.holder = holder;
  k.holder_running = jobs::still_running(holder.pid, holder.start);
  k.job = Bound{group, holder.uid, {}};
  // The cgroup a service before the restart made for it (the same root: the same unit).
  if (cgroups_ && cgroups::populated(cgroups_->path_of(lease.id)))
    k.job.cgroup = cgroups_->path_of(lease.id);
  try {
    book_.restore(k.keeper, lease);
  } catch (...) {
    book_.remove_client(k.keeper, now);
    throw;
  }
  auto [it, fresh] = kept_.emplace(lease.id, std::move(k));
  if (!it->second.holder_running && alive(it->second.job)) orphan(lease.id, it->second, now);
}

Refusal JobKeeper::hand_back(LeaseId lease, ClientId client, const HolderProcess &holder,
                             double now) {
  auto it = kept_.find(lease);
  const std::string no = "no lease " + std::to_string(lease) + " is kept for this process";
  if (it == kept_.end()) return {GF_ERR_NOT_FOUND, no};
  const Kept &k = it->second;
  // Its holder dropped the connection while the service ran (holder_gone) or its job was
  // orphaned: such a lease has no holder to give it back to.
  if (!k.holder_running || k.holder.pid != holder.pid || k.holder.start != holder.start ||
      k.holder.uid != holder.uid) {
    return {GF_ERR_NOT_FOUND, no + " (it is kept for pid " + std::to_string(k.holder.pid) + ")"};
  }
  const ClientId keeper = k.keeper;
  const Bound job = k.job;
  if (!book_.hand_over(lease, client, now)) return {GF_ERR_NOT_FOUND, no};
  book_.remove_client(keeper, now);
  kept_.erase(it);
  if (job.group != 0) bound_[lease] = job;
  log_("lease " + std::to_string(lease) + " taken back by its holder (pid " +
       std::to_string(holder.pid) + ") after a restart");
  return {};
}

ClientId JobKeeper::add_keeper(const HolderProcess &holder, const std::string &why, double now) {
  const ClientId id = new_client_();
  ClientInfo info;
  info.uid = holder.uid;
  info.pid = holder.pid;
  info.user = holder.user;
  info.name = "job of '" + holder.name + "' (" + why + ")";
  info.since = now;
  book_.add_client(id, info);
  return id;
}

void JobKeeper::orphan(LeaseId lease, Kept &k, double now) {
  if (k.orphaned_at >= 0 || (k.job.group == 0 && k.job.cgroup.empty())) return;
  k.orphaned_at = now;
  const int reached = signal(k.job, SIGTERM);
  // A stopped member acts on it only once continued: else it would wait for the SIGKILL.
  signal(k.job, SIGCONT);
  log_("lease " + std::to_string(lease) + ": SIGTERM to " + std::to_string(reached) +
       " process(es) of its orphaned " + job_text(k.job) + "; SIGKILL in " +
       std::to_string(static_cast<int>(grace_s_)) + " s if any is left");
}

bool JobKeeper::watch(double now) {
  bool ended = false;
  std::erase_if(draining_, [](const std::string &cgroup) { return cgroups::remove(cgroup); });
  for (auto it = kept_.begin(); it != kept_.end();) {
    const LeaseId lease = it->first;
    Kept &k = it->second;
    const bool group_alive = alive(k.job);
    if (k.holder_running && !jobs::still_running(k.holder.pid, k.holder.start)) {
      k.holder_running = false;
      if (group_alive) orphan(lease, k, now);
    }
    if (!k.holder_running && !group_alive) {
      book_.remove_client(k.keeper, now);
      log_("lease " + std::to_string(lease) + " released: no process of its job is left");
      drop_cgroup(k.job);
      it = kept_.erase(it);
      ended = true;
      continue;
    }
    if (group_alive && k.orphaned_at >= 0 && now - k.orphaned_at >= grace_s_) {
      const int reached = signal(k.job, SIGKILL);
      if (reached > 0 && !k.killed) {
        k.killed = true;
        log_("lease " + std::to_string(lease) + ": SIGKILL to " + std::to_string(reached) +
             " process(es) of " + job_text(k.job) + " still running after " +
             std::to_string(static_cast<int>(grace_s_)) + " s");
      }
    }
    ++it;
  }
  return ended;
}

void JobKeeper::forget(LeaseId lease) {
  if (auto b = bound_.find(lease); b != bound_.end()) {
    drop_cgroup(b->second);
    bound_.erase(b);
  }
  // A kept lease released by a privileged client: its keeper has nothing left to keep.
  auto it = kept_.find(lease);
  if (it == kept_.end()) return;
  book_.remove_client(it->second.keeper, 0);
  drop_cgroup(it->second.job);
  kept_.erase(it);
}

std::vector<JobKeeper::KeptView> JobKeeper::kept() const {
  std::vector<KeptView> out;
  for (const auto &[lease, k] : kept_) out.push_back({lease, k.keeper, k.holder, k.job.group});
  return out;
}

}  // namespace gf::service
