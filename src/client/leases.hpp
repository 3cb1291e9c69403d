// The lease protocol on a connection to the service: asking for leases (waiting or not),
// handing them back, binding them to a process group, hearing that the service wants one back,
// and the service's status (its lease book). Its own state is which leases were revoked.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "client/session.hpp"
#include "gpuflow.h"
#include "wire/records.hpp"

namespace gf::client {

// The wire's records are the client's (wire/records.hpp): one vocabulary for both ends.
using wire::DeviceSlot;
using wire::Grant;
using wire::LeaseAsk;
using wire::LeasedDevice;

class LeaseClient {
 public:
  explicit LeaseClient(Session &session);  // registers with it: before Session::start()

  // Waits for a lease (timeout_ms < 0: as long as it takes). Throws gf::Error with the
  // service's status (GF_ERR_INFEASIBLE, GF_TIMEOUT, …) or GF_ERR_SYSTEM when the connection
  // is gone.
  Grant acquire(const LeaseAsk &ask, int64_t timeout_ms);
  // Asks for a lease without waiting: `done` runs once, on the reader thread (or on this one if
  // sending fails), with the grant, or with the status and reason it was not granted.
  using GrantDone =
      std::function<void(const Grant *grant, gf_status status, const std::string &why)>;
  void acquire_async(const LeaseAsk &ask, GrantDone done);
  // Takes back, on a new connection after the service restarted, a lease this process held on
  // the connection before (wire.fbs, LeaseReclaim); `done` as for acquire_async. A service that
  // kept no such lease for this process refuses it (GF_ERR_NOT_FOUND); an older one, which
  // cannot, gets nothing sent (GF_ERR_STATE).
  void reclaim_async(uint64_t lease_id, GrantDone done);
  // reclaim_async, waiting for the answer; throws gf::Error with the refusal.
  Grant reclaim(uint64_t lease_id);
  // Hands a lease back without waiting for an answer (a quiet LeaseRelease): returns once it is
  // sent. Throws GF_ERR_SYSTEM when the connection is gone (the lease ended with it).
  void release(uint64_t lease_id);
  // Tells the service that `process_group` uses the lease (wire.fbs, LeaseBind): should this
  // process go without releasing it, the lease outlives it until the group is gone. Throws
  // gf::Error with the service's refusal (not this user's group, a remote service, …).
  void bind_process_group(uint64_t lease_id, int32_t process_group);
  // The service's StatusReply, as the verified frame payload.
  std::vector<uint8_t> status();

  bool revoked(uint64_t lease_id) const;
  // Called on the reader thread when the service asks for a lease back, or (lease 0) when the
  // connection closes. Must be quick. Set before leases are taken.
  void on_revoke(std::function<void(uint64_t lease_id)> callback);

 private:
  // The answer to a lease request: the grant, or why not (refused).
  Refusal grant_of(const std::vector<uint8_t> &payload, Grant &grant) const;
  // Sends the request `frame` builds and hands its answer, a grant or why not, to `done`.
  void ask_grant(const Session::FrameBuilder &frame, GrantDone done);
  // Session::ask with the answer deadline of bind and status.
  std::vector<uint8_t> ask(wire::Body expected, const char *what,
                           const Session::FrameBuilder &frame);

  Session &session_;
  mutable std::mutex mu_;
  std::set<uint64_t> revoked_;
  std::function<void(uint64_t)> on_revoke_;
};

}  // namespace gf::client
