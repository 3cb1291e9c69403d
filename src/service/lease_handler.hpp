// The lease protocol of the service (docs/service.md): requests, cancels, releases and binds as
// clients send them, grants and revocations as the book decides them, and request timeouts. It
// is given the book and everything else it works with, and answers through Client::send, so it
// runs as well against recording clients in a test as on the service's loop.
#pragma once

#include <cstddef>

#include "service/client.hpp"
#include "service/deadlines.hpp"
#include "service/job_keeper.hpp"
#include "service/lease_book.hpp"
#include "service/saved_grants.hpp"
#include "wire/framing.hpp"

namespace gf::service {

// One client's share of the service's own time and memory (docs/service.md, "Faults"): requests
// it may have waiting, and those all clients of one user may have.
constexpr size_t kMaxQueuedPerClient = 1024;
constexpr size_t kMaxQueuedPerUser = 4096;

class LeaseHandler {
 public:
  struct Collaborators {
    LeaseBook &book;
    JobKeeper &jobs;
    GrantSaver &saver;
    const ClientTable &clients;
    Deadlines &deadlines;
    Log log;
    Clock now;
  };
  explicit LeaseHandler(Collaborators with) : w_(std::move(with)) {
    w_.deadlines.on_due(Deadline::kLeaseRequest,
                        [this](ClientId client, RequestId id) { timed_out(client, id); });
  }
  LeaseHandler(const LeaseHandler &) = delete;
  LeaseHandler &operator=(const LeaseHandler &) = delete;

  // A well-formed request the service will not take is refused alone (LeaseRefused with its
  // id): the connection and its leases stay.
  void on_lease_request(Client &c, const wire::LeaseRequest &m);
  void on_lease_release(Client &c, const wire::LeaseRelease &m);
  void on_lease_cancel(Client &c, const wire::LeaseCancel &m);
  void on_lease_bind(Client &c, const wire::LeaseBind &m);
  void on_lease_reclaim(Client &c, const wire::LeaseReclaim &m);

  // Grants what may go now, each on disk before its holder hears of it.
  void schedule();
  // At the end of a loop turn: one pass for every request, release and departure of the turn
  // (a flood of requests costs one pass per read, not one per request).
  void schedule_if_due() {
    if (schedule_due_) schedule();
  }
  // Fair share over time: a request that has waited past kRevokePatience_s while others hold
  // more than their due asks those holders to hand leases back (at their task boundaries: the
  // service never kills anything).
  void revoke_for_waiting(double t);
  // Ends leases kept for jobs whose processes all went (job_keeper.hpp).
  void watch_jobs(double t);
  // `c` went: its queued requests and leases go back (leases bound to a running job of a client
  // on this host are kept for it). Returns the tail of its departure's log line.
  std::string client_gone(Client &c);

 private:
  void refuse(Client &c, RequestId id, const Refusal &refused);
  // LeaseGranted for `lease`, answering `request`, and its log line (`how`: "granted to").
  void send_grant(Client &c, RequestId request, const Lease &lease, const char *how);
  // A request's timeout passed while it waited: refused (GF_TIMEOUT).
  void timed_out(ClientId client, RequestId id);
  Refusal invalid(const wire::LeaseRequest &m) const;
  Refusal beyond_bounds(const Client &c) const;
  const DeviceSlot &slot_of(int32_t ordinal) const;

  Collaborators w_;
  bool schedule_due_ = false;
};

}  // namespace gf::service
