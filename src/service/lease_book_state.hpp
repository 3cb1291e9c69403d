// The lease book's private state, shared by lease_book.cpp (accounting, validation, views) and
// lease_book_pass.cpp (ordering, fitting, reservations, revocation). Not part of the interface.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/fixed_point.hpp"
#include "service/lease_book.hpp"

namespace gf::service::detail {

inline constexpr FixedPoint kOne = FixedPoint::from_raw(FixedPoint::kScale);

// What a client or a user holds, summed over its leases.
struct Holdings {
  FixedPoint gpus;      // device units: 1 per whole device, the share for a fraction
  uint64_t memory = 0;  // bytes over all devices
  FixedPoint cpus;
};

// Usage (dominant share integrated over time, decayed) as of `at`, and what is held since then.
struct Account {
  double usage = 0;
  double at = 0;
  Holdings held;
};

// A queued request, with its amounts checked and converted once at submit.
struct Request {
  RequestId id = 0;
  LeaseAsk ask;
  double since = 0;
  uint64_t seq = 0;    // arrival order across the book
  uint32_t count = 0;  // devices: 0 (CPU only), 1 (a fraction or one whole), N
  bool whole = false;  // whole devices (share 1 each)
  FixedPoint share;    // per device
  FixedPoint cpus;
  std::vector<size_t> allowed;  // device indices it may use, ascending
  FixedPoint units() const { return FixedPoint::from_raw(share.raw() * count); }
};

struct ClientState {
  ClientInfo info;
  Account account;
  std::vector<Request> queue;  // by priority (higher first), then arrival
  uint32_t leases = 0;
};

struct UserState {
  double weight = 1;
  Account account;
};

// In use (or reserved) on one device.
struct DeviceAmount {
  FixedPoint share;
  uint64_t memory = 0;
};

// Where a request would go: per device index, the amount it takes; and its CPUs.
struct Placement {
  std::vector<std::pair<size_t, DeviceAmount>> devices;
  FixedPoint cpus;
};

// What one pass over the queue sees: the amounts in use and those reservations claim.
struct Pool {
  std::vector<DeviceAmount> used;
  std::vector<DeviceAmount> reserved;
  FixedPoint cpus_used;
  FixedPoint cpus_reserved;
};

// What a pass decided for one queued request, in the order it considered them.
struct Step {
  ClientId client = 0;
  const Request *request = nullptr;
  enum Outcome { kGranted, kReserved, kWaiting } outcome = kWaiting;
  Placement placement;  // when granted
};

}  // namespace gf::service::detail

namespace gf::service {

struct LeaseBook::Impl {
  std::vector<DeviceSlot> slots;  // copies of the book's (which stay for its inline accessors)
  FixedPoint cpus_cap;
  Policy policy;
  uint64_t total_memory = 0;

  std::vector<detail::DeviceAmount> used;  // per device index
  FixedPoint cpus_used;
  std::map<ClientId, detail::ClientState> clients;
  std::map<uint32_t, detail::UserState> users;  // kept after a user's clients leave (usage)
  std::map<LeaseId, Lease> leases;
  std::deque<EndedLease> ended;        // at most kEndedLeasesKept
  std::map<int32_t, size_t> index_of;  // ordinal -> device index
  LeaseId next_lease = 1;
  uint64_t next_seq = 1;
  double now = 0;  // the latest `now` seen; earlier values are read as this one

  Impl(std::vector<DeviceSlot> s, FixedPoint cpus, Policy p)
      : slots(std::move(s)), cpus_cap(cpus), policy(std::move(p)) {}

  // --- accounting (lease_book.cpp)
  double dominant_share(const detail::Holdings &h) const;
  double usage_at(const detail::Account &a, double t) const;
  void advance(double t);  // brings every account to max(t, now)
  double user_key(uint32_t uid, const detail::Holdings &held, double t) const;
  double client_key(const detail::ClientState &c, const detail::Holdings &held, double t) const;
  uint64_t memory_for(const detail::Request &r, size_t device) const;
  void take(ClientId client, const Lease &lease, bool add);  // adds or removes a lease's amounts
  void drop_lease(LeaseId id);

  // --- passes (lease_book_pass.cpp)
  detail::Pool pool() const;
  bool within_caps(const detail::Request &r, const detail::Holdings &client,
                   const detail::Holdings &user) const;
  std::optional<detail::Placement> fit(const detail::Request &r, const detail::Pool &p,
                                       bool honour_reservations) const;
  bool reserve(const detail::Request &r, detail::Pool &p) const;
  std::vector<detail::Step> pass(double t) const;
  std::vector<LeaseId> revoke_for(ClientId client, double t);
};

}  // namespace gf::service
