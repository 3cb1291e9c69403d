// An endpoint to one peer's worker. Where the transports can report a dead peer
// (kPeerFailureHandled), it is made in peer-error mode: UCX then fails every request on it and
// calls `on_error` (from progress, on the worker's thread) with text naming the peer. Closing is
// always forced: nothing waits for a peer that may be gone, and requests still on the endpoint
// complete with UCS_ERR_CANCELED.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/ucx_context.hpp"

namespace gf::transport {

class Endpoint {
 public:
  using OnError = std::function<void(const std::string &why)>;
  // `peer` names the other side in errors ("client 3 (pid 42, ann)", "the gpuflow service at
  // unix:///…"). Throws gf::Error when UCX cannot make the endpoint.
  Endpoint(Worker &worker, const std::vector<uint8_t> &peer_address, std::string peer,
           OnError on_error);
  ~Endpoint();  // close()
  Endpoint(const Endpoint &) = delete;
  Endpoint &operator=(const Endpoint &) = delete;

  ucp_ep_h get() const { return ep_; }
  // The endpoint is closed with UCP_EP_CLOSE_FLAG_FORCE; its close request frees itself on a
  // later progress, and the error callback is disarmed. Idempotent.
  void close();
  // What UCX chose for this endpoint, e.g. "posix/memory, cma/memory" (from ucp_ep_print_info:
  // UCX 1.13's ucp_ep_query has no transport field). Empty when closed.
  std::string transports() const;

  // The error callback's argument. UCX 1.13 may call the callback after a forced close has
  // completed (a cma transfer of the closed endpoint still queued; AddressSanitizer caught it),
  // so the worker keeps it until the worker goes; close() only disarms it.
  struct ErrorSink;

 private:
  ucp_ep_h ep_ = nullptr;
  std::string peer_;
  mutable std::string transports_;  // once known
  std::shared_ptr<ErrorSink> sink_;
};

// Parses ucp_ep_print_info's text: the distinct "transport/device" of its lanes, in lane order.
std::string transports_of_ep_info(const std::string &text);

}  // namespace gf::transport
