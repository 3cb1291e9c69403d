// The lease book: accounting, request checks and the public operations. The order of the queue,
// fitting, reservations and revocation are in lease_book_pass.cpp; what it shows (its views) and
// its invariant in lease_book_views.cpp.
#include "service/lease_book.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "service/lease_book_state.hpp"

namespace gf::service {

using detail::Account;
using detail::ClientState;
using detail::Holdings;
using detail::Request;

namespace {

// Amounts as people read them: "0.5", "2", "1.25".
std::string amount(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void check_arg(bool ok, const std::string &what) {
  if (!ok) fail(GF_ERR_INVALID_ARGUMENT, "lease book: " + what);
}

bool positive_finite(double v) {
  return std::isfinite(v) && v > 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Accounting

double LeaseBook::Impl::dominant_share(const Holdings &h) const {
  double d = 0;
  if (!slots.empty()) d = std::max(d, h.gpus.to_double() / static_cast<double>(slots.size()));
  if (total_memory > 0) {
    d = std::max(d, static_cast<double>(h.memory) / static_cast<double>(total_memory));
  }
  if (!cpus_cap.is_zero()) d = std::max(d, h.cpus.to_double() / cpus_cap.to_double());
  return d;
}

// Usage decays by half every half-life and grows by the dominant share held, so over a span dt
// with share s held: u' = u * 2^(-dt/h) + s * (h / ln 2) * (1 - 2^(-dt/h)).
double LeaseBook::Impl::usage_at(const Account &a, double t) const {
  double dt = std::max(0.0, t - a.at);
  if (dt == 0) return a.usage;
  double s = dominant_share(a.held);
  double h = policy.usage_half_life_s;
  if (std::isinf(h)) return a.usage + s * dt;
  double rate = std::log(2.0) / h;
  double decay = std::exp(-rate * dt);
  return a.usage * decay + s * (-std::expm1(-rate * dt)) / rate;
}

void LeaseBook::Impl::advance(double t) {
  t = std::max(t, now);
  for (auto &[id, c] : clients) {
    c.account.usage = usage_at(c.account, t);
    c.account.at = t;
  }
  for (auto &[uid, u] : users) {
    u.account.usage = usage_at(u.account, t);
    u.account.at = t;
  }
  now = t;
}

double LeaseBook::Impl::user_key(uint32_t uid, const Holdings &held, double t) const {
  const auto &u = users.at(uid);
  return (usage_at(u.account, t) + dominant_share(held)) / u.weight;
}

double LeaseBook::Impl::client_key(const ClientState &c, const Holdings &held, double t) const {
  return (usage_at(c.account, t) + dominant_share(held)) / c.info.weight;
}

// Bytes a request takes on one device: as asked; else all of it for a whole device, else the
// share's part, rounded down (exactly: memory * share.raw / kScale without overflow).
uint64_t LeaseBook::Impl::memory_for(const Request &r, size_t device) const {
  if (r.ask.gpu_memory > 0) return r.ask.gpu_memory;
  uint64_t m = slots[device].memory;
  if (r.whole) return m;
  auto raw = static_cast<uint64_t>(r.share.raw());
  constexpr auto kScale = static_cast<uint64_t>(FixedPoint::kScale);
  return m / kScale * raw + (m % kScale) * raw / kScale;
}

void LeaseBook::Impl::take(ClientId client, const Lease &lease, bool add) {
  auto &c = clients.at(client);
  auto &u = users.at(c.info.uid);
  for (const auto &d : lease.devices) {
    auto &in_use = used[index_of.at(d.ordinal)];
    for (Holdings *h : {&c.account.held, &u.account.held}) {
      if (add) {
        h->gpus += d.share;
        h->memory += d.memory;
      } else {
        h->gpus -= d.share;
        h->memory -= d.memory;
      }
    }
    if (add) {
      in_use.share += d.share;
      in_use.memory += d.memory;
    } else {
      in_use.share -= d.share;
      in_use.memory -= d.memory;
    }
  }
  for (Holdings *h : {&c.account.held, &u.account.held}) {
    if (add) {
      h->cpus += lease.cpus;
    } else {
      h->cpus -= lease.cpus;
    }
  }
  if (add) {
    cpus_used += lease.cpus;
    ++c.leases;
  } else {
    cpus_used -= lease.cpus;
    --c.leases;
  }
}

void LeaseBook::Impl::drop_lease(LeaseId id) {
  auto it = leases.find(id);
  take(it->second.client, it->second, false);
  const ClientInfo &holder = clients.at(it->second.client).info;
  if (ended.size() == kEndedLeasesKept) ended.pop_front();
  ended.push_back(EndedLease{std::move(it->second), holder.pid, holder.uid, holder.user, now});
  leases.erase(it);
}

// ---------------------------------------------------------------------------------------------
// Construction and clients

namespace {
void check_policy(const Policy &policy) {
  check_arg(policy.usage_half_life_s > 0 && !std::isnan(policy.usage_half_life_s),
            "usage_half_life_s " + amount(policy.usage_half_life_s) + " must be > 0");
  check_arg(FixedPoint::representable(policy.client_gpu_cap),
            "client_gpu_cap " + amount(policy.client_gpu_cap) + " must be a finite amount >= 0");
  check_arg(FixedPoint::representable(policy.user_gpu_cap),
            "user_gpu_cap " + amount(policy.user_gpu_cap) + " must be a finite amount >= 0");
  for (const auto &[uid, w] : policy.user_weights) {
    check_arg(positive_finite(w), "the weight " + amount(w) + " of uid " + std::to_string(uid) +
                                      " must be a positive finite number");
  }
}
}  // namespace

LeaseBook::LeaseBook(std::vector<DeviceSlot> devices, double cpus, Policy policy)
    : slots_(std::move(devices)), cpus_(cpus), policy_(std::move(policy)) {
  check_arg(FixedPoint::representable(cpus), "cpus " + amount(cpus) +
                                                 " must be a finite amount >= 0 (at most " +
                                                 amount(FixedPoint::kMaxAmount) + ")");
  check_policy(policy_);
  impl_ = std::make_unique<Impl>(slots_, FixedPoint::from_double(cpus), policy_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const auto &s = slots_[i];
    check_arg(s.memory > 0 && FixedPoint::bytes_representable(s.memory),
              "device " + std::to_string(s.ordinal) + " has memory " + std::to_string(s.memory) +
                  " (must be > 0 and at most " + std::to_string(FixedPoint::kMaxBytes) + ")");
    check_arg(impl_->index_of.emplace(s.ordinal, i).second,
              "device ordinal " + std::to_string(s.ordinal) + " appears twice");
    impl_->total_memory += s.memory;
  }
  impl_->used.resize(slots_.size());
}

void LeaseBook::set_policy(Policy policy, double now) {
  check_policy(policy);
  // Usage accrued so far is settled under the old half-life; the new one decays it from now on.
  impl_->advance(now);
  for (auto &[uid, user] : impl_->users) {
    auto w = policy.user_weights.find(uid);
    user.weight = w == policy.user_weights.end() ? 1.0 : w->second;
  }
  impl_->policy = policy;
  policy_ = std::move(policy);
}

LeaseBook::~LeaseBook() = default;
LeaseBook::LeaseBook(LeaseBook &&) noexcept = default;
LeaseBook &LeaseBook::operator=(LeaseBook &&) noexcept = default;

void LeaseBook::add_client(ClientId client, ClientInfo info) {
  check_arg(positive_finite(info.weight), "client " + std::to_string(client) + ": weight " +
                                              amount(info.weight) +
                                              " must be a positive finite number");
  check_arg(!impl_->clients.contains(client),
            "client " + std::to_string(client) + " is already known");
  auto [uit, fresh] = impl_->users.try_emplace(info.uid);
  if (fresh) {
    auto w = policy_.user_weights.find(info.uid);
    uit->second.weight = w == policy_.user_weights.end() ? 1.0 : w->second;
    uit->second.account.at = impl_->now;
  }
  ClientState c;
  c.info = std::move(info);
  c.account.at = impl_->now;
  impl_->clients.emplace(client, std::move(c));
}

std::vector<LeaseId> LeaseBook::remove_client(ClientId client, double now) {
  std::vector<LeaseId> released;
  auto it = impl_->clients.find(client);
  if (it == impl_->clients.end()) return released;
  impl_->advance(now);
  for (const auto &[id, l] : impl_->leases) {
    if (l.client == client) released.push_back(id);
  }
  for (LeaseId id : released) impl_->drop_lease(id);
  impl_->clients.erase(it);
  return released;
}

// ---------------------------------------------------------------------------------------------
// Requests and leases

namespace {
// Every reason a request is refused at submit: it can never be granted on this node as asked.
Refusal infeasible(std::string why) {
  return {GF_ERR_INFEASIBLE, std::move(why)};
}
}  // namespace

Refusal LeaseBook::submit(ClientId client, RequestId request, const LeaseAsk &ask, double now) {
  Impl &m = *impl_;
  auto cit = m.clients.find(client);
  if (cit == m.clients.end()) return infeasible("unknown client " + std::to_string(client));
  ClientState &c = cit->second;
  const std::string nodes_gpus =
      "the node has " + std::to_string(slots_.size()) + " GPU" + (slots_.size() == 1 ? "" : "s");
  for (const auto &q : c.queue) {
    if (q.id == request)
      return infeasible("request id " + std::to_string(request) + " is already queued");
  }
  for (const auto &[id, l] : m.leases) {
    if (l.client == client && l.request == request) {
      return infeasible("request id " + std::to_string(request) + " already holds lease " +
                        std::to_string(id));
    }
  }

  Request r;
  r.id = request;
  r.ask = ask;
  r.since = std::max(now, m.now);
  r.seq = m.next_seq;

  // GPUs: 0, a fraction of one device, or a whole number of devices.
  if (!FixedPoint::representable(ask.gpus)) {
    return infeasible("gpus " + amount(ask.gpus) + " is not a finite amount >= 0");
  }
  if (FixedPoint::rounds_to_zero(ask.gpus)) {
    return infeasible("gpus " + amount(ask.gpus) + " is below the smallest share (0.0001)");
  }
  if (ask.gpus > 0 && ask.gpus < 1) {
    r.share = FixedPoint::from_double(ask.gpus);
    if (r.share >= detail::kOne) {
      return infeasible("gpus " + amount(ask.gpus) + " rounds to a whole device; ask for 1");
    }
    r.count = 1;
  } else if (ask.gpus >= 1) {
    if (ask.gpus != std::floor(ask.gpus)) {
      return infeasible("gpus " + amount(ask.gpus) +
                        " must be below 1 (a share of one device) or a whole number of devices");
    }
    if (ask.gpus > static_cast<double>(slots_.size())) {
      return infeasible("asks for " + amount(ask.gpus) + (ask.gpus == 1 ? " GPU; " : " GPUs; ") +
                        nodes_gpus);
    }
    r.whole = true;
    r.share = detail::kOne;
    r.count = static_cast<uint32_t>(ask.gpus);
  }
  if (r.count == 0 && ask.gpu_memory > 0) {
    return infeasible("gpu_memory " + std::to_string(ask.gpu_memory) + " is asked without gpus");
  }

  // Devices it may use.
  if (r.count > 0) {
    std::set<size_t> allowed;
    for (int32_t ord : ask.devices) {
      auto it = m.index_of.find(ord);
      if (it == m.index_of.end()) {
        std::string have;
        for (const auto &s : slots_) have += (have.empty() ? "" : ", ") + std::to_string(s.ordinal);
        return infeasible("device " + std::to_string(ord) +
                          " does not exist (the node's devices: " + (have.empty() ? "none" : have) +
                          ")");
      }
      allowed.insert(it->second);
    }
    if (ask.devices.empty()) {
      for (size_t i = 0; i < slots_.size(); ++i) allowed.insert(i);
    }
    r.allowed.assign(allowed.begin(), allowed.end());
    if (r.allowed.size() < r.count) {
      return infeasible("asks for " + std::to_string(r.count) + " GPU" + (r.count == 1 ? "" : "s") +
                        (ask.devices.empty()
                             ? "; " + nodes_gpus
                             : " among " + std::to_string(r.allowed.size()) + " allowed device" +
                                   (r.allowed.size() == 1 ? "" : "s")));
    }
    uint64_t largest = 0;
    for (size_t i : r.allowed) largest = std::max(largest, slots_[i].memory);
    if (ask.gpu_memory > largest) {
      return infeasible("gpu_memory " + std::to_string(ask.gpu_memory) +
                        " bytes is more than any " + (ask.devices.empty() ? "" : "allowed ") +
                        "device has (at most " + std::to_string(largest) + ")");
    }
    size_t big_enough = 0;
    for (size_t i : r.allowed) big_enough += m.memory_for(r, i) <= slots_[i].memory ? 1 : 0;
    if (big_enough < r.count) {
      return infeasible("gpu_memory " + std::to_string(ask.gpu_memory) + " bytes on each of " +
                        std::to_string(r.count) + " devices: only " + std::to_string(big_enough) +
                        " device(s) have that much");
    }
  }

  // CPUs.
  if (!FixedPoint::representable(ask.cpus)) {
    return infeasible("cpus " + amount(ask.cpus) + " is not a finite amount >= 0");
  }
  if (FixedPoint::rounds_to_zero(ask.cpus)) {
    return infeasible("cpus " + amount(ask.cpus) + " is below the smallest amount (0.0001)");
  }
  r.cpus = FixedPoint::from_double(ask.cpus);
  if (r.cpus > m.cpus_cap) {
    return infeasible("asks for " + amount(ask.cpus) + " CPUs; the node has " + amount(cpus_));
  }
  if (r.count == 0 && r.cpus.is_zero()) return infeasible("asks for nothing (gpus 0 and cpus 0)");

  // Caps.
  FixedPoint units = r.units();
  if (policy_.client_gpu_cap > 0 && units > FixedPoint::from_double(policy_.client_gpu_cap)) {
    return infeasible("asks for " + amount(units.to_double()) +
                      " GPUs; a client may hold at most " + amount(policy_.client_gpu_cap));
  }
  if (policy_.user_gpu_cap > 0 && units > FixedPoint::from_double(policy_.user_gpu_cap)) {
    return infeasible("asks for " + amount(units.to_double()) + " GPUs; a user may hold at most " +
                      amount(policy_.user_gpu_cap));
  }

  m.advance(now);
  ++m.next_seq;
  auto pos = std::find_if(c.queue.begin(), c.queue.end(), [&](const Request &q) {
    return q.ask.priority < ask.priority;  // after every request of equal or higher priority
  });
  c.queue.insert(pos, std::move(r));
  return {};
}

bool LeaseBook::cancel(ClientId client, RequestId request) {
  auto it = impl_->clients.find(client);
  if (it == impl_->clients.end()) return false;
  auto &q = it->second.queue;
  auto r = std::find_if(q.begin(), q.end(), [&](const Request &x) { return x.id == request; });
  if (r == q.end()) return false;
  q.erase(r);
  return true;
}

bool LeaseBook::release(ClientId caller, LeaseId lease, bool privileged, double now) {
  auto it = impl_->leases.find(lease);
  if (it == impl_->leases.end()) return false;
  if (it->second.client != caller && !privileged) return false;
  impl_->advance(now);
  impl_->drop_lease(lease);
  return true;
}

std::vector<Lease> LeaseBook::schedule(double now) {
  Impl &m = *impl_;
  m.advance(now);
  std::vector<detail::Step> steps = m.pass(m.now);
  std::vector<Lease> granted;
  std::map<ClientId, std::set<RequestId>> done;
  for (const auto &s : steps) {
    if (s.outcome != detail::Step::kGranted) continue;
    Lease l;
    l.id = m.next_lease++;
    l.client = s.client;
    l.request = s.request->id;
    l.name = s.request->ask.name;
    for (const auto &[i, a] : s.placement.devices) {
      l.devices.push_back({slots_[i].ordinal, a.share, a.memory});
    }
    l.cpus = s.placement.cpus;
    l.since = m.now;
    done[s.client].insert(l.request);
    granted.push_back(l);
  }
  // The steps point into the queues: drop the granted requests only after copying them out.
  for (const auto &entry : done) {  // not a structured binding: clang 14 cannot capture those
    const std::set<RequestId> &ids = entry.second;
    auto &q = m.clients.at(entry.first).queue;
    std::erase_if(q, [&](const Request &r) { return ids.contains(r.id); });
  }
  for (const auto &l : granted) {
    m.take(l.client, l, true);
    m.leases.emplace(l.id, l);
  }
  return granted;
}

void LeaseBook::restore(ClientId client, Lease lease) {
  Impl &m = *impl_;
  const std::string name = "restored lease " + std::to_string(lease.id);
  check_arg(m.clients.contains(client), name + ": unknown client " + std::to_string(client));
  check_arg(lease.id != 0 && !m.leases.contains(lease.id), name + ": the id is taken");
  check_arg(!lease.devices.empty() || lease.cpus > FixedPoint(), name + " holds nothing");
  check_arg(lease.cpus >= FixedPoint() && m.cpus_used + lease.cpus <= m.cpus_cap,
            name + ": its " + amount(lease.cpus.to_double()) + " CPUs do not fit");
  std::set<int32_t> seen;
  for (const DeviceShare &d : lease.devices) {
    const std::string device = name + ": device " + std::to_string(d.ordinal);
    auto it = m.index_of.find(d.ordinal);
    check_arg(it != m.index_of.end(), device + " does not exist");
    check_arg(seen.insert(d.ordinal).second, device + " appears twice");
    check_arg(d.share > FixedPoint() && d.share <= detail::kOne,
              device + ": share " + amount(d.share.to_double()) + " is not in (0, 1]");
    const detail::DeviceAmount &in_use = m.used[it->second];
    check_arg(in_use.share + d.share <= detail::kOne &&
                  d.memory <= slots_[it->second].memory - in_use.memory,
              device + " does not have room for it beside the leases held");
  }
  lease.client = client;
  lease.revoking = false;
  m.take(client, lease, true);
  m.next_lease = std::max(m.next_lease, lease.id + 1);
  m.leases.emplace(lease.id, std::move(lease));
}

bool LeaseBook::hand_over(LeaseId lease, ClientId to, double now) {
  Impl &m = *impl_;
  auto it = m.leases.find(lease);
  if (it == m.leases.end() || !m.clients.contains(to)) return false;
  if (it->second.client == to) return true;
  m.advance(now);
  m.take(it->second.client, it->second, false);
  it->second.client = to;
  m.take(to, it->second, true);
  return true;
}

LeaseId LeaseBook::next_lease_id() const {
  return impl_->next_lease;
}

void LeaseBook::skip_lease_ids(LeaseId next) {
  impl_->next_lease = std::max(impl_->next_lease, next);
}

std::vector<LeaseId> LeaseBook::revoke_for(ClientId client, double now) {
  impl_->advance(now);
  return impl_->revoke_for(client, impl_->now);
}

}  // namespace gf::service
