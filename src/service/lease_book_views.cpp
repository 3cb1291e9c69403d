// What the lease book shows (counts, leases, the queue in pass order, clients, devices) and the
// invariant its tests check after every operation.
#include <algorithm>

#include "core/error.hpp"
#include "service/lease_book.hpp"
#include "service/lease_book_state.hpp"

namespace gf::service {

using detail::ClientState;
using detail::Holdings;
using detail::Request;

// ---------------------------------------------------------------------------------------------
// Views

bool LeaseBook::fits_now(ClientId client, RequestId request) const {
  const Impl &m = *impl_;
  auto it = m.clients.find(client);
  if (it == m.clients.end()) return false;
  const ClientState &c = it->second;
  for (const Request &r : c.queue) {
    if (r.id != request) continue;
    return m.within_caps(r, c.account.held, m.users.at(c.info.uid).account.held) &&
           m.fit(r, m.pool(), false).has_value();
  }
  return false;
}

size_t LeaseBook::queued_count(ClientId client) const {
  auto it = impl_->clients.find(client);
  return it == impl_->clients.end() ? 0 : it->second.queue.size();
}

size_t LeaseBook::queued_count_of_user(uint32_t uid) const {
  size_t n = 0;
  for (const auto &[id, c] : impl_->clients) n += c.info.uid == uid ? c.queue.size() : 0;
  return n;
}

std::vector<std::pair<ClientId, double>> LeaseBook::waiting_since() const {
  std::vector<std::pair<ClientId, double>> out;
  for (const auto &[id, c] : impl_->clients) {
    if (c.queue.empty()) continue;
    double since = c.queue.front().since;
    for (const Request &r : c.queue) since = std::min(since, r.since);
    out.emplace_back(id, since);
  }
  return out;
}

const Lease *LeaseBook::lease(LeaseId id) const {
  auto it = impl_->leases.find(id);
  return it == impl_->leases.end() ? nullptr : &it->second;
}

std::vector<Lease> LeaseBook::leases() const {
  std::vector<Lease> out;
  out.reserve(impl_->leases.size());
  for (const auto &[id, l] : impl_->leases) out.push_back(l);
  return out;
}

std::vector<EndedLease> LeaseBook::ended() const {
  return {impl_->ended.begin(), impl_->ended.end()};
}

std::vector<QueuedView> LeaseBook::queued(double now) const {
  std::vector<QueuedView> out;
  for (const auto &s : impl_->pass(std::max(now, impl_->now))) {
    out.push_back({s.client, s.request->id, s.request->ask, s.request->since,
                   s.outcome == detail::Step::kReserved});
  }
  return out;
}

std::vector<ClientView> LeaseBook::clients(double now) const {
  const Impl &m = *impl_;
  double t = std::max(now, m.now);
  std::vector<ClientView> out;
  for (const auto &[id, c] : m.clients) {
    ClientView v;
    v.client = id;
    v.info = c.info;
    v.leases = c.leases;
    v.queued = static_cast<uint32_t>(c.queue.size());
    v.gpus_in_use = c.account.held.gpus.to_double();
    v.dominant_share = m.dominant_share(c.account.held);
    v.usage = m.usage_at(c.account, t);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<DeviceView> LeaseBook::devices() const {
  std::vector<DeviceView> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    out.push_back({slots_[i], impl_->used[i].share, impl_->used[i].memory});
  }
  return out;
}

FixedPoint LeaseBook::cpus_in_use() const {
  return impl_->cpus_used;
}

// ---------------------------------------------------------------------------------------------
// Invariant

void LeaseBook::check_invariant() const {
  const Impl &m = *impl_;
  // Each message names what broke (no std::source_location: clang 14 with libstdc++ lacks it).
  auto expect = [](bool ok, const std::string &what) {
    if (!ok) fail(GF_ERR_INTERNAL, "lease book invariant broken: " + what);
  };
  std::vector<detail::DeviceAmount> used(slots_.size());
  FixedPoint cpus;
  std::map<ClientId, Holdings> by_client;
  std::map<uint32_t, Holdings> by_user;
  std::map<ClientId, uint32_t> count;
  for (const auto &[id, l] : m.leases) {
    std::string name = "lease " + std::to_string(id);
    expect(l.id == id, name + " is filed under another id");
    expect(m.clients.contains(l.client), name + " belongs to an unknown client");
    expect(!l.devices.empty() || !l.cpus.is_zero(), name + " holds nothing");
    Holdings h;
    std::set<int32_t> seen;
    for (const auto &d : l.devices) {
      expect(m.index_of.contains(d.ordinal), name + " holds an unknown device");
      expect(seen.insert(d.ordinal).second, name + " holds a device twice");
      expect(d.share > FixedPoint() && d.share <= detail::kOne, name + " holds a bad share");
      size_t i = m.index_of.at(d.ordinal);
      used[i].share += d.share;
      used[i].memory += d.memory;
      h.gpus += d.share;
      h.memory += d.memory;
    }
    h.cpus = l.cpus;
    cpus += l.cpus;
    for (Holdings *sum : {&by_client[l.client], &by_user[m.clients.at(l.client).info.uid]}) {
      sum->gpus += h.gpus;
      sum->memory += h.memory;
      sum->cpus += h.cpus;
    }
    ++count[l.client];
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    std::string name = "device " + std::to_string(slots_[i].ordinal);
    expect(m.used[i].share == used[i].share, name + ": share in use is not the leases' sum");
    expect(m.used[i].memory == used[i].memory, name + ": memory in use is not the leases' sum");
    expect(used[i].share >= FixedPoint() && used[i].share <= detail::kOne,
           name + ": share in use outside [0, 1]");
    expect(used[i].memory <= slots_[i].memory, name + ": memory in use above its capacity");
  }
  expect(cpus == m.cpus_used, "CPUs in use are not the leases' sum");
  expect(cpus >= FixedPoint() && cpus <= m.cpus_cap, "CPUs in use outside [0, node's]");
  auto same = [](const Holdings &a, const Holdings &b) {
    return a.gpus == b.gpus && a.memory == b.memory && a.cpus == b.cpus;
  };
  for (const auto &[id, c] : m.clients) {
    std::string name = "client " + std::to_string(id);
    expect(same(c.account.held, by_client[id]), name + ": holdings are not its leases' sum");
    expect(c.leases == count[id], name + ": lease count is not its leases'");
    std::set<RequestId> ids;
    for (size_t k = 0; k < c.queue.size(); ++k) {
      expect(ids.insert(c.queue[k].id).second, name + ": a request id is queued twice");
      if (k > 0) {
        const auto &a = c.queue[k - 1], &b = c.queue[k];
        expect(
            a.ask.priority > b.ask.priority || (a.ask.priority == b.ask.priority && a.seq < b.seq),
            name + ": queue out of order");
      }
    }
    expect(m.users.contains(c.info.uid), name + ": no account for its user");
  }
  for (const auto &[uid, u] : m.users) {
    expect(same(u.account.held, by_user[uid]),
           "uid " + std::to_string(uid) + ": holdings are not its clients' leases' sum");
  }
}

}  // namespace gf::service
