// The service's ledger of the node: which client holds which share of which device, what waits,
// and who goes next. Pure bookkeeping, no I/O and no clock of its own (callers pass `now` in
// seconds), so every policy decision is unit-testable.
//
// Policy (see docs/service.md, "Fair share"):
// - Fair share is hierarchical, as in Slurm's fair-share tree: first between users (uid), by
//   the service's per-user weights (default 1), then between one user's clients by the weight
//   each client gave in its Hello. A user can only redistribute its own share, so a claimed
//   weight gains nothing against other users.
// - A client's usage is its dominant share (max over GPUs, device memory and CPUs of its part
//   of the node) integrated over time with exponential decay (half-life `usage_half_life_s`),
//   in share-seconds; a user's is the same over what all its clients hold together (and
//   outlives them: a user that reconnects keeps its usage; a client does not). The key a user
//   or client is ranked by is (usage + dominant share now) / weight, lowest first; ties go to
//   the lower uid, then client id. With one device and two clients of weights 1 and 3 that both
//   flood requests, the device's time splits 1:3.
// - Within a client, requests go by priority (higher first), then arrival.
// - Reserve, then backfill: the best-ranked request that does not fit reserves the devices it
//   will use (those with the most free already); later requests may only take what no
//   reservation claims, so a 4-GPU request is not starved by a stream of 1-GPU ones.
//   Reservations claim amounts (a whole device claims all its share; a fraction its share and
//   memory; CPUs their amount), every request that does not fit claims what earlier claims left
//   (if that is enough), and they are worked out afresh at every pass, not stored: queued()
//   shows them.
// - Caps: per-client and per-user limits on GPUs held (in device units). A request above a cap
//   is refused at submit; one that fits the cap but not with what the client already holds
//   waits (and claims nothing).
// - A fraction of a device goes to the device where it fits most tightly (whole devices stay
//   free for whole-device requests).
// - Time: a `now` earlier than one already passed in is read as that one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fixed_point.hpp"
#include "core/refusal.hpp"
#include "wire/records.hpp"

namespace gf::service {

using ClientId = uint64_t;
using RequestId = uint64_t;  // unique per client (chosen by the client)
using LeaseId = uint64_t;    // unique per service (chosen by the book)

// The wire's own records (wire/records.hpp): the book speaks the protocol's vocabulary.
using wire::DeviceSlot;
using wire::LeaseAsk;

struct ClientInfo {
  uint32_t uid = 0;
  uint32_t pid = 0;
  std::string user;   // from uid
  std::string name;   // from Hello
  double weight = 1;  // from Hello, within its user's share; > 0
  double since = 0;   // `now` at add_client
};

struct DeviceShare {
  int32_t ordinal = 0;
  FixedPoint share;  // of the device: 1 for a whole one
  uint64_t memory = 0;
};

struct Lease {
  LeaseId id = 0;
  ClientId client = 0;
  RequestId request = 0;
  std::string name;
  std::vector<DeviceShare> devices;
  FixedPoint cpus;
  double since = 0;
  bool revoking = false;  // asked back (see revoke); still held until released
};

// A lease that ended (released, or its holder gone), with who held it: for timelines.
struct EndedLease {
  Lease lease;
  uint32_t pid = 0, uid = 0;
  std::string user;
  double until = 0;
};
inline constexpr size_t kEndedLeasesKept = 1024;

struct Policy {
  double usage_half_life_s = 300;
  std::map<uint32_t, double> user_weights;  // uid -> weight; absent: 1
  double client_gpu_cap = 0;                // GPUs one client may hold at once (0: no cap)
  double user_gpu_cap = 0;                  // GPUs one user's clients may hold together (0: no cap)
};

// One queued request, in the order the book would consider them now.
struct QueuedView {
  ClientId client = 0;
  RequestId request = 0;
  LeaseAsk ask;
  double since = 0;
  bool reserved = false;
};

struct ClientView {
  ClientId client = 0;
  ClientInfo info;
  uint32_t leases = 0;
  uint32_t queued = 0;
  double gpus_in_use = 0;
  double dominant_share = 0;
  double usage = 0;
};

struct DeviceView {
  DeviceSlot slot;
  FixedPoint share_in_use;
  uint64_t memory_in_use = 0;
};

class LeaseBook {
 public:
  // Throws gf::Error (GF_ERR_INVALID_ARGUMENT) for a duplicate ordinal, a device with no memory,
  // cpus or a policy value that is negative, not finite or (weights, half-life) not positive.
  LeaseBook(std::vector<DeviceSlot> devices, double cpus, Policy policy);
  ~LeaseBook();
  LeaseBook(LeaseBook &&) noexcept;
  LeaseBook &operator=(LeaseBook &&) noexcept;
  // Not copyable: a copy would share (or silently fork) the ledger.
  LeaseBook(const LeaseBook &) = delete;
  LeaseBook &operator=(const LeaseBook &) = delete;

  // Replaces the policy, checked as the constructor checks it (then nothing changes). Leases
  // and queued requests stay; usage accrued until `now` keeps its value, and decays by the new
  // half-life from then on. The next schedule() uses it: a request queued above a lowered cap
  // waits until the cap is raised again or it is cancelled.
  void set_policy(Policy policy, double now);
  const Policy &policy() const { return policy_; }

  // Throws gf::Error (GF_ERR_INVALID_ARGUMENT) for a client id already present or a weight that
  // is not a positive finite number.
  void add_client(ClientId client, ClientInfo info);
  // Drops the client's queued requests and releases its leases (it disconnected or died).
  // Returns the leases that were released.
  std::vector<LeaseId> remove_client(ClientId client, double now);

  // Queues a request. Returns no refusal, or GF_ERR_INFEASIBLE and why it can never be granted
  // on this node (more devices or memory than exist, a device ordinal that does not exist, a
  // malformed amount, above a cap, a request id the client already uses, queued or held by a
  // lease): then nothing is queued. Does not grant: schedule() does.
  Refusal submit(ClientId client, RequestId request, const LeaseAsk &ask, double now);
  // Withdraws a queued request of this client; false when it is not queued (already granted,
  // never asked, or another client's).
  bool cancel(ClientId client, RequestId request);
  // Releases a lease. Only its holder may, unless `privileged` (root, the service's owner).
  // Returns false when no such lease exists or it is not the caller's.
  bool release(ClientId caller, LeaseId lease, bool privileged, double now);

  // Puts back a lease granted before the service restarted (its job still runs), held by
  // `client` (already added) under its old id; later ids are larger. Throws gf::Error
  // (GF_ERR_INVALID_ARGUMENT) naming what is wrong when a device does not exist or appears twice,
  // a share or amount is malformed, the id is taken, or it does not fit beside what is held.
  void restore(ClientId client, Lease lease);
  // Hands a lease to another client (its holder went; its job did not): the usage goes on
  // counting for the new holder and its user. False when the lease or the client is unknown.
  bool hand_over(LeaseId lease, ClientId to, double now);
  // The id the next grant gets; skip_lease_ids(n) makes it at least n (ids stay unique across a
  // restart, so a lease id in a job's environment never names another lease).
  LeaseId next_lease_id() const;
  void skip_lease_ids(LeaseId next);

  // Grants every queued request that may go now, in fair-share order (reserve, then
  // backfill). The caller tells each client about its grants.
  std::vector<Lease> schedule(double now);

  // Marks leases to ask back so that `client`'s best queued request could go, when fair share
  // says the holders are over their due. Returns the leases newly marked. (Used by the service
  // when a request has waited longer than its patience; never touches running work itself.)
  // Over their due: another user's client when that user's key is above `client`'s user's; a
  // client of the same user when its key is above `client`'s. Most over-share holder first, its
  // newest leases first, passing over leases that free nothing the request could use, only as
  // many as needed counting those already revoking as gone. Marks nothing when the request
  // would fit already, waits on its own caps, or would not fit even with all of them back.
  std::vector<LeaseId> revoke_for(ClientId client, double now);

  // The queued request would fit now in what nobody holds, within its client's caps (what a
  // pass would also give to others first is not considered). False when it is not queued.
  bool fits_now(ClientId client, RequestId request) const;
  // Requests waiting: of one client, of all the clients of one user (O(clients)).
  size_t queued_count(ClientId client) const;
  size_t queued_count_of_user(uint32_t uid) const;
  // Each client with requests waiting, and since when its longest-waiting one has (O(queued),
  // no pass over the queue).
  std::vector<std::pair<ClientId, double>> waiting_since() const;

  const Lease *lease(LeaseId id) const;  // null when none; valid until the next change
  std::vector<Lease> leases() const;     // by id
  // The last kEndedLeasesKept leases that ended, oldest first.
  std::vector<EndedLease> ended() const;
  std::vector<QueuedView> queued(double now) const;  // in the order schedule() considers them
  std::vector<ClientView> clients(double now) const;
  std::vector<DeviceView> devices() const;
  const std::vector<DeviceSlot> &slots() const { return slots_; }
  double cpus() const { return cpus_; }
  FixedPoint cpus_in_use() const;

  // 0 <= in use <= capacity on every device and for CPUs, and in-use equals the sum of the
  // leases. Throws gf::Error (GF_ERR_INTERNAL) naming the line when it does not hold.
  void check_invariant() const;

 private:
  struct Impl;
  std::vector<DeviceSlot> slots_;
  double cpus_;
  Policy policy_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gf::service
