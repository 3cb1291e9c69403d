// A UCX context and one worker, restricted to what a data plane needs: the tag API, wake-up
// events, and either shared-memory transports only (node-local: docs/transport.md, "Trust"), or
// TCP on one named network device (remote clients, and the relay that serves them: never inside
// the service's own process). No listener, no sockaddr connection manager.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gf::transport {

// The transports a data plane may use, as UCX_TLS spells them. sysv is left out on purpose: its
// segments are created 0660 (group-readable), posix ones 0600 and reached through /proc/PID/fd.
constexpr const char *kTransports = "self,posix,cma";

// Whether kTransports can report a dead peer. In UCX 1.13.1 none of them can ("self/memory0 - no
// peer failure handler, posix/memory - no peer failure handler" from UCX's transport selection):
// endpoints then use UCP_ERR_HANDLING_MODE_NONE and a dead peer is noticed by the control
// channel, whose unix socket closes the moment the peer dies (docs/transport.md, "Peer failure").
constexpr bool kPeerFailureHandled = false;

// What remote data planes use: TCP, which does report a dead peer (peer-error mode).
constexpr const char *kNetworkTransports = "tcp";

// Throws gf::Error (GF_ERR_SYSTEM) naming `what` and UCX's status text.
void check(ucs_status_t status, const std::string &what);

// One ucp_context plus one ucp_worker in single-thread mode: every call on it must come from one
// thread at a time (the service's loop thread, or a client's progress thread).
class Worker {
 public:
  // Reads UCX's configuration (UCX_* variables), then forces the transports to kTransports,
  // whatever UCX_TLS says. (UCX_POSIX_USE_PROC_LINK stays the user's: ucp_config_modify cannot
  // set transport options in 1.13; its default, y, is what docs/transport.md relies on.)
  // `rendezvous_only`: every send, however small, waits for the receiver's match (the relay's
  // side toward the service: nothing unasked is left with the receiver).
  static std::unique_ptr<Worker> create(const std::string &name, bool rendezvous_only = false);
  // A TCP-only worker on `net_device` (an interface name such as "eth0" or "lo": the one the
  // control connection goes through), in peer-error mode. Throws gf::Error.
  static std::unique_ptr<Worker> create_networked(const std::string &name,
                                                  const std::string &net_device);
  ~Worker();
  Worker(const Worker &) = delete;
  Worker &operator=(const Worker &) = delete;

  ucp_worker_h get() const { return worker_; }
  // Whether its endpoints can be made in peer-error mode (TCP can, shared memory cannot).
  bool peer_failure_handled() const { return peer_failure_handled_; }
  const std::string &transports() const { return transports_; }
  const std::vector<uint8_t> &address() const { return address_; }
  // The worker's wake-up descriptor: readable when ucp_worker_arm said so and an event came.
  int event_fd() const { return efd_; }
  // Progresses until nothing is left to do, then arms the wake-up descriptor. False when events
  // arrived while arming (UCS_ERR_BUSY): progress again before sleeping.
  bool progress_and_arm();
  // Arms the wake-up descriptor without progressing first (the caller just drained the worker and
  // handled what came). False when events are pending (UCS_ERR_BUSY): progress again.
  bool arm();
  // Progresses until there is nothing left to do; returns whether anything was done.
  bool drain();
  // Before the worker goes: lets forced closes and cancelled requests complete (they do on
  // progress), briefly, so their requests go back to UCX first.
  void settle();
  // Keeps `object` alive until the worker is destroyed: for what UCX may still use after an
  // endpoint is gone (an error callback's argument, called from a transfer still queued).
  void keep(std::shared_ptr<void> object) { kept_.push_back(std::move(object)); }

 private:
  Worker() = default;
  static std::unique_ptr<Worker> create_with(const std::string &name, const char *transports,
                                             const std::string &net_device,
                                             bool rendezvous_only = false);
  bool peer_failure_handled_ = false;
  std::string transports_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<uint8_t> address_;
  std::vector<std::shared_ptr<void>> kept_;  // released after the worker
};

}  // namespace gf::transport
