// The lease book's decisions: the order of the queue (hierarchical fair share), where a request
// fits, what a request that does not fit reserves, and which leases to ask back for a client.
#include <algorithm>
#include <set>
#include <tuple>

#include "service/lease_book.hpp"
#include "service/lease_book_state.hpp"

namespace gf::service {

using detail::DeviceAmount;
using detail::Holdings;
using detail::Placement;
using detail::Pool;
using detail::Request;
using detail::Step;

namespace {

void add(Holdings &h, const Placement &p) {
  for (const auto &[i, a] : p.devices) {
    h.gpus += a.share;
    h.memory += a.memory;
  }
  h.cpus += p.cpus;
}

bool is_zero(const DeviceAmount &a) {
  return a.share.is_zero() && a.memory == 0;
}

// Lease amounts out of (or back into) a pool, as if released.
void give_back(Pool &p, const std::map<int32_t, size_t> &index_of, const Lease &l, bool back) {
  for (const auto &d : l.devices) {
    auto &u = p.used[index_of.at(d.ordinal)];
    if (back) {
      u.share += d.share;
      u.memory += d.memory;
    } else {
      u.share -= d.share;
      u.memory -= d.memory;
    }
  }
  if (back) {
    p.cpus_used += l.cpus;
  } else {
    p.cpus_used -= l.cpus;
  }
}

}  // namespace

Pool LeaseBook::Impl::pool() const {
  Pool p;
  p.used = used;
  p.reserved.resize(used.size());
  p.cpus_used = cpus_used;
  return p;
}

bool LeaseBook::Impl::within_caps(const Request &r, const Holdings &client,
                                  const Holdings &user) const {
  FixedPoint units = r.units();
  if (policy.client_gpu_cap > 0 &&
      client.gpus + units > FixedPoint::from_double(policy.client_gpu_cap)) {
    return false;
  }
  if (policy.user_gpu_cap > 0 && user.gpus + units > FixedPoint::from_double(policy.user_gpu_cap)) {
    return false;
  }
  return true;
}

// Where `r` goes now: whole devices on devices entirely free (lowest ordinals first); a fraction
// on the device where it fits most tightly (most share, then most memory, already in use). With
// `honour_reservations`, what reservations claim is not free.
std::optional<Placement> LeaseBook::Impl::fit(const Request &r, const Pool &p,
                                              bool honour_reservations) const {
  static const DeviceAmount kNone;
  auto claimed = [&](size_t i) -> const DeviceAmount & {
    return honour_reservations ? p.reserved[i] : kNone;
  };
  Placement out;
  out.cpus = r.cpus;
  FixedPoint cpus_claimed = honour_reservations ? p.cpus_reserved : FixedPoint();
  if (p.cpus_used + cpus_claimed + r.cpus > cpus_cap) return std::nullopt;
  if (r.whole) {
    for (size_t i : r.allowed) {
      if (out.devices.size() == r.count) break;
      uint64_t mem = memory_for(r, i);
      if (is_zero(p.used[i]) && is_zero(claimed(i)) && mem <= slots[i].memory) {
        out.devices.push_back({i, {detail::kOne, mem}});
      }
    }
    if (out.devices.size() < r.count) return std::nullopt;
  } else if (r.count == 1) {
    std::optional<size_t> best;
    for (size_t i : r.allowed) {
      const auto &u = p.used[i];
      const auto &c = claimed(i);
      if (u.share + c.share + r.share > detail::kOne) continue;
      if (u.memory + c.memory + memory_for(r, i) > slots[i].memory) continue;
      if (!best ||
          std::tie(u.share, u.memory) > std::tie(p.used[*best].share, p.used[*best].memory)) {
        best = i;
      }
    }
    if (!best) return std::nullopt;
    out.devices.push_back({*best, {r.share, memory_for(r, *best)}});
  }
  return out;
}

// Claims for `r` what it will need, on the devices with the most free now, out of what earlier
// reservations left; false (nothing claimed) when that is not there.
bool LeaseBook::Impl::reserve(const Request &r, Pool &p) const {
  if (p.cpus_reserved + r.cpus > cpus_cap) return false;
  std::vector<size_t> open;
  for (size_t i : r.allowed) {
    const auto &c = p.reserved[i];
    uint64_t mem = memory_for(r, i);
    bool fits = r.whole ? is_zero(c) && mem <= slots[i].memory
                        : c.share + r.share <= detail::kOne && c.memory + mem <= slots[i].memory;
    if (fits) open.push_back(i);
  }
  if (open.size() < r.count) return false;
  std::stable_sort(open.begin(), open.end(), [&](size_t a, size_t b) {
    return std::tie(p.used[a].share, p.used[a].memory) <
           std::tie(p.used[b].share, p.used[b].memory);
  });
  for (size_t k = 0; k < r.count; ++k) {
    auto &c = p.reserved[open[k]];
    c.share += r.share;
    c.memory += memory_for(r, open[k]);
  }
  p.cpus_reserved += r.cpus;
  return true;
}

// One pass over the queue in fair-share order: the user with the lowest key, its client with
// the lowest key, that client's next request (priority, then arrival). A grant raises the
// client's and the user's dominant share, so the keys are taken again after each one. Each
// request is considered once: O(queued × (devices + log clients)).
std::vector<Step> LeaseBook::Impl::pass(double t) const {
  Pool p = pool();
  std::map<ClientId, Holdings> held;
  std::map<uint32_t, Holdings> user_held;
  std::map<ClientId, size_t> cursor;
  std::map<ClientId, double> ckey;
  std::map<uint32_t, double> ukey;
  std::map<uint32_t, std::set<std::pair<double, ClientId>>> by_user;
  std::set<std::pair<double, uint32_t>> order;
  for (const auto &[id, c] : clients) {
    if (c.queue.empty()) continue;
    held[id] = c.account.held;
    user_held[c.info.uid] = users.at(c.info.uid).account.held;
    ckey[id] = client_key(c, c.account.held, t);
    by_user[c.info.uid].insert({ckey[id], id});
    cursor[id] = 0;
  }
  for (const auto &[uid, cs] : by_user) {
    ukey[uid] = user_key(uid, user_held[uid], t);
    order.insert({ukey[uid], uid});
  }

  std::vector<Step> steps;
  while (!order.empty()) {
    uint32_t uid = order.begin()->second;
    auto &cs = by_user[uid];
    ClientId id = cs.begin()->second;
    const auto &c = clients.at(id);
    const Request &r = c.queue[cursor[id]++];
    Step s;
    s.client = id;
    s.request = &r;
    if (within_caps(r, held[id], user_held[uid])) {
      if (auto placed = fit(r, p, true)) {
        s.outcome = Step::kGranted;
        s.placement = std::move(*placed);
        for (const auto &[i, a] : s.placement.devices) {
          p.used[i].share += a.share;
          p.used[i].memory += a.memory;
        }
        p.cpus_used += s.placement.cpus;
        add(held[id], s.placement);
        add(user_held[uid], s.placement);
      } else if (reserve(r, p)) {
        s.outcome = Step::kReserved;
      }
    }
    bool granted = s.outcome == Step::kGranted;
    steps.push_back(std::move(s));
    bool exhausted = cursor[id] == c.queue.size();
    if (exhausted || granted) {
      cs.erase({ckey[id], id});
      if (!exhausted) {
        ckey[id] = client_key(c, held[id], t);
        cs.insert({ckey[id], id});
      }
    }
    if (cs.empty() || granted) {
      order.erase({ukey[uid], uid});
      if (!cs.empty()) {
        ukey[uid] = user_key(uid, user_held[uid], t);
        order.insert({ukey[uid], uid});
      }
    }
  }
  return steps;
}

// Asks back leases of clients above their due (ranked after `client`: another user's when that
// user's key is above this client's user's, a fellow client's when its key is above this
// client's) until `client`'s first queued request would fit once the leases marked revoking are
// released. Most over-share holder first, its newest lease first; leases that free nothing the
// request could use are passed over, and a lease whose return the request turns out not to need
// is left alone. Marks nothing when even all of them would not do.
std::vector<LeaseId> LeaseBook::Impl::revoke_for(ClientId client, double t) {
  auto it = clients.find(client);
  if (it == clients.end() || it->second.queue.empty()) return {};
  const auto &me = it->second;
  const Request &r = me.queue.front();
  uint32_t uid = me.info.uid;
  if (!within_caps(r, me.account.held, users.at(uid).account.held)) return {};
  Pool p = pool();
  for (const auto &[id, l] : leases) {
    if (l.revoking) give_back(p, index_of, l, false);
  }
  if (fit(r, p, false)) return {};

  double my_ukey = user_key(uid, users.at(uid).account.held, t);
  double my_ckey = client_key(me, me.account.held, t);
  std::vector<std::tuple<double, double, ClientId>> holders;  // most over-share first
  for (const auto &[id, c] : clients) {
    if (id == client || c.leases == 0) continue;
    double uk = user_key(c.info.uid, users.at(c.info.uid).account.held, t);
    double ck = client_key(c, c.account.held, t);
    bool over = c.info.uid != uid ? uk > my_ukey : ck > my_ckey;
    if (over) holders.emplace_back(uk, ck, id);
  }
  std::sort(holders.begin(), holders.end(), std::greater<>());

  std::set<size_t> allowed(r.allowed.begin(), r.allowed.end());
  auto useful = [&](const Lease &l) {
    if (!l.cpus.is_zero() && !r.cpus.is_zero()) return true;
    return std::any_of(l.devices.begin(), l.devices.end(), [&](const DeviceShare &d) {
      return allowed.contains(index_of.at(d.ordinal));
    });
  };
  std::vector<Lease *> marked;
  bool fits = false;
  for (const auto &[uk, ck, holder] : holders) {
    std::vector<Lease *> theirs;
    for (auto &[id, l] : leases) {
      if (l.client == holder && !l.revoking && useful(l)) theirs.push_back(&l);
    }
    std::sort(theirs.begin(), theirs.end(), [](const Lease *a, const Lease *b) {
      return std::tie(a->since, a->id) > std::tie(b->since, b->id);
    });
    for (Lease *l : theirs) {
      give_back(p, index_of, *l, false);
      marked.push_back(l);
      if ((fits = fit(r, p, false).has_value())) break;
    }
    if (fits) break;
  }
  if (!fits) return {};
  // Keep the most over-share holders' marks: try the later ones back first.
  std::vector<LeaseId> out;
  for (size_t k = marked.size(); k-- > 0;) {
    give_back(p, index_of, *marked[k], true);
    if (fit(r, p, false)) {
      marked[k] = nullptr;
    } else {
      give_back(p, index_of, *marked[k], false);
    }
  }
  for (Lease *l : marked) {
    if (l == nullptr) continue;
    l->revoking = true;
    out.push_back(l->id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gf::service
