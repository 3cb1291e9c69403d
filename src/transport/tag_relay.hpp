// The pump inside `gpuflow-relay` (docs/transport.md, "Remote clients"): every tagged message that
// arrives on one worker is sent on with the same tag to the other side's endpoint, and back. It
// knows nothing of blobs: the service and its remote client speak the data-plane protocol to each
// other through it exactly as they would directly, so the service's own process never opens a
// UCX network socket (UCX aborts on crafted TCP bytes; here that ends only the relay, which the
// service notices and reports as the remote client's failure).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/endpoint.hpp"
#include "transport/ucx_context.hpp"

namespace gf::transport {

class TagRelay {
 public:
  // One side: a worker, and the endpoint to its peer. Messages that arrive on `a`'s worker go to
  // `b`'s endpoint and the other way round. A message longer than `max_message` bytes is an
  // error (the service never lets a client hold more than that).
  struct Side {
    Worker *worker = nullptr;
    Endpoint *to_peer = nullptr;
    std::string name;  // "the service", "the remote client"
    // Non-zero: every tag this side sends must carry it in its upper 32 bits (the client's id),
    // so a remote client never reaches another client's transfers. A tag outside is an error.
    uint64_t tag_space = 0;
  };
  // Messages held at once (received, or being received, and not yet taken by the other side):
  // past this the relay takes no more, and the rest waits in UCX on the sender's side.
  static constexpr int kMaxMessagesHeld = 4096;
  TagRelay(Side a, Side b, uint64_t max_message);
  ~TagRelay();
  TagRelay(const TagRelay &) = delete;
  TagRelay &operator=(const TagRelay &) = delete;

  // Progresses both workers and moves what arrived. Returns false once something failed
  // (error() says what); the relay should then end.
  bool pump();
  // Whether messages are in flight (poll briefly rather than sleep).
  bool busy() const { return in_flight_ > 0 || bytes_held_ > 0 || messages_held_ > 0; }
  const std::string &error() const { return error_; }
  // Called by an endpoint's error callback.
  void fail(const std::string &why) {
    if (error_.empty()) error_ = why;
  }

  struct Message;

 private:
  void take_arrivals(int from);
  Side sides_[2];
  uint64_t max_message_;
  std::deque<std::shared_ptr<Message>> arrived_[2];  // received, to send to the other side
  int in_flight_ = 0;
  uint64_t bytes_held_ = 0;  // received or being received, not yet sent on
  int messages_held_ = 0;    // the same, counted
  std::string error_;
};

}  // namespace gf::transport
