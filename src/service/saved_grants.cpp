#include "service/saved_grants.hpp"

#include "core/error.hpp"
#include "service/job_processes.hpp"

namespace gf::service {

SavedBook save_grants(const LeaseBook &book, const JobKeeper &keeper,
                      const std::function<HolderProcess(ClientId)> &holder_of, int64_t started_ms) {
  std::map<ClientId, JobKeeper::KeptView> kept;
  for (const JobKeeper::KeptView &k : keeper.kept()) kept[k.keeper] = k;
  SavedBook out;
  out.next_lease_id = book.next_lease_id();
  for (const Lease &l : book.leases()) {
    SavedLease s;
    s.lease = l;
    for (const DeviceShare &d : l.devices) {
      std::string uuid;
      for (const DeviceSlot &slot : book.slots())
        if (slot.ordinal == d.ordinal) uuid = slot.uuid;
      s.uuids.push_back(uuid);
    }
    s.since_ms = started_ms + static_cast<int64_t>(l.since * 1000);
    auto k = kept.find(l.client);
    const HolderProcess holder = k != kept.end() ? k->second.holder : holder_of(l.client);
    s.holder_pid = holder.pid;
    s.holder_start = holder.start;
    s.uid = holder.uid;
    s.user = holder.user;
    s.holder_name = holder.name;
    s.process_group = k != kept.end() ? k->second.group : keeper.group_of(l.id);
    out.leases.push_back(std::move(s));
  }
  return out;
}

size_t restore_grants(const SavedBook &saved, LeaseBook &book, JobKeeper &keeper,
                      int64_t started_ms, double now,
                      const std::function<void(const std::string &)> &log) {
  size_t kept = 0;
  for (const SavedLease &s : saved.leases) {
    const std::string name = "saved lease " + std::to_string(s.lease.id);
    const bool holder_running = jobs::still_running(s.holder_pid, s.holder_start);
    const bool group_alive = keeper.job_alive(s.lease.id, s.process_group);
    if (!holder_running && !group_alive) continue;  // it ended while no service watched
    bool same_devices = s.uuids.size() == s.lease.devices.size();
    for (size_t i = 0; same_devices && i < s.lease.devices.size(); ++i) {
      bool found = false;
      for (const DeviceSlot &slot : book.slots())
        found |= slot.ordinal == s.lease.devices[i].ordinal && slot.uuid == s.uuids[i];
      same_devices = found;
    }
    if (!same_devices) {
      log(name + " left out: its devices are not this service's any more");
      continue;
    }
    HolderProcess holder{s.holder_pid, s.holder_start, s.uid, s.user, s.holder_name};
    Lease lease = s.lease;
    lease.since = static_cast<double>(s.since_ms - started_ms) / 1000.0;
    try {
      keeper.keep_restored(std::move(lease), holder, s.process_group, now);
      ++kept;
      log(name + " kept: " +
          (holder_running ? "its holder (pid " + std::to_string(s.holder_pid) + ") still runs"
                          : "process group " + std::to_string(s.process_group) +
                                " still runs (its holder is gone)"));
    } catch (const Error &e) {
      log(name + " left out: " + e.what());
    }
  }
  book.skip_lease_ids(saved.next_lease_id);
  return kept;
}

}  // namespace gf::service

namespace gf::service {

GrantSaver::GrantSaver(LeaseBook &book, JobKeeper &keeper,
                       std::function<HolderProcess(ClientId)> holder_of, int64_t started_ms,
                       Log log)
    : book_(book),
      keeper_(keeper),
      holder_of_(std::move(holder_of)),
      started_ms_(started_ms),
      log_(std::move(log)) {}

GrantSaver::~GrantSaver() = default;

void GrantSaver::open(const std::string &path, double now) {
  try {
    std::vector<std::string> problems;
    file_ = std::make_unique<SavedBookFile>(path, problems);
    const SavedBook saved = file_->load(problems);
    for (const std::string &p : problems) log_("saved grants not used: " + p);
    const size_t kept = restore_grants(saved, book_, keeper_, started_ms_, now, log_);
    if (kept) log_(std::to_string(kept) + " lease(s) from before a restart kept for their jobs");
  } catch (const Error &e) {
    log_(std::string("grants are not saved (a restart will not know the leases): ") + e.what());
    file_.reset();
  }
}

void GrantSaver::save() {
  changed_ = false;
  if (!file_) return;
  try {
    file_->save(save_grants(book_, keeper_, holder_of_, started_ms_));
    warned_ = false;
  } catch (const Error &e) {
    if (!warned_) log_(std::string("grants not saved: ") + e.what());
    warned_ = true;
  }
}

void GrantSaver::finish() {
  if (book_.leases().empty()) {
    if (file_) file_->remove();
  } else {
    save();
  }
}

}  // namespace gf::service
