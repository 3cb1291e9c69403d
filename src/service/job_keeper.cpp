#include "service/job_keeper.hpp"

#include <signal.h>

#include "service/job_processes.hpp"

namespace gf::service {

JobKeeper::JobKeeper(LeaseBook &book, double grace_s, std::function<ClientId()> new_client,
                     std::function<void(const std::string &)> log)
    : book_(book), grace_s_(grace_s), new_client_(std::move(new_client)), log_(std::move(log)) {}

Refusal JobKeeper::bind(ClientId client, uint32_t uid, LeaseId lease, int32_t group) {
  const Lease *l = book_.lease(lease);
  if (!l || l->client != client) {
    return {GF_ERR_INVALID_ARGUMENT, "no lease " + std::to_string(lease) + " of yours"};
  }
  if (Refusal refused = jobs::bindable(group, uid)) return refused;
  bound_[lease] = Bound{group, uid};
  return {};
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
    if (!jobs::group_alive(job.group)) continue;
    Kept k;
    k.keeper = add_keeper(holder, "its holder went", now);
    k.job = job;
    // The holder dropped its connection: whether or not its process lives on, the lease has no
    // holder any more, so its job is an orphan.
    k.holder = holder;
    k.holder_running = false;
    book_.hand_over(l.id, k.keeper, now);
    log_("lease " + std::to_string(l.id) + " stays held for process group " +
         std::to_string(job.group) + ", which still runs after its holder (pid " +
         std::to_string(holder.pid) + ") went");
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
  k.job = Bound{group, holder.uid};
  try {
    book_.restore(k.keeper, lease);
  } catch (...) {
    book_.remove_client(k.keeper, now);
    throw;
  }
  auto [it, fresh] = kept_.emplace(lease.id, std::move(k));
  if (!it->second.holder_running && jobs::group_alive(group)) orphan(lease.id, it->second, now);
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
  if (k.orphaned_at >= 0 || k.job.group == 0) return;
  k.orphaned_at = now;
  const int reached = jobs::signal_group(k.job.group, k.job.uid, SIGTERM);
  // A stopped member acts on it only once continued: else it would wait for the SIGKILL.
  jobs::signal_group(k.job.group, k.job.uid, SIGCONT);
  log_("lease " + std::to_string(lease) + ": SIGTERM to " + std::to_string(reached) +
       " process(es) of its orphaned group " + std::to_string(k.job.group) + "; SIGKILL in " +
       std::to_string(static_cast<int>(grace_s_)) + " s if any is left");
}

bool JobKeeper::watch(double now) {
  bool ended = false;
  for (auto it = kept_.begin(); it != kept_.end();) {
    const LeaseId lease = it->first;
    Kept &k = it->second;
    const bool group_alive = k.job.group != 0 && jobs::group_alive(k.job.group);
    if (k.holder_running && !jobs::still_running(k.holder.pid, k.holder.start)) {
      k.holder_running = false;
      if (group_alive) orphan(lease, k, now);
    }
    if (!k.holder_running && !group_alive) {
      book_.remove_client(k.keeper, now);
      log_("lease " + std::to_string(lease) + " released: no process of its job is left");
      it = kept_.erase(it);
      ended = true;
      continue;
    }
    if (group_alive && k.orphaned_at >= 0 && now - k.orphaned_at >= grace_s_) {
      const int reached = jobs::signal_group(k.job.group, k.job.uid, SIGKILL);
      if (reached > 0 && !k.killed) {
        k.killed = true;
        log_("lease " + std::to_string(lease) + ": SIGKILL to " + std::to_string(reached) +
             " process(es) of group " + std::to_string(k.job.group) + " still running after " +
             std::to_string(static_cast<int>(grace_s_)) + " s");
      }
    }
    ++it;
  }
  return ended;
}

void JobKeeper::forget(LeaseId lease) {
  bound_.erase(lease);
  // A kept lease released by a privileged client: its keeper has nothing left to keep.
  auto it = kept_.find(lease);
  if (it == kept_.end()) return;
  book_.remove_client(it->second.keeper, 0);
  kept_.erase(it);
}

std::vector<JobKeeper::KeptView> JobKeeper::kept() const {
  std::vector<KeptView> out;
  for (const auto &[lease, k] : kept_) out.push_back({lease, k.keeper, k.holder, k.job.group});
  return out;
}

}  // namespace gf::service
