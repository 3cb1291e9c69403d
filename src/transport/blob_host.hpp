// The service's side of the data plane: one worker driven by the service's libuv loop
// (LoopPlane), and per client a BlobHost: the endpoint to the client's worker, its blobs, and
// the puts and gets in flight. Everything here runs on the loop thread. Tags are the client's:
// a transfer a client announces must carry its id in the tag's upper 32 bits, so two clients'
// announced transfers never share a tag. The worker's tag matching is worker-wide and does not
// check the sender, so a client sending under another's tag could still match it: only processes
// of the service's own uid get a data plane (docs/transport.md, "Trust").
#pragma once

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transport/blob_store.hpp"
#include "transport/endpoint.hpp"
#include "transport/uv_progress.hpp"

namespace gf::transport {

class LoopPlane {
 public:
  // Throws gf::Error when UCX cannot start (the service then runs without a data plane).
  LoopPlane(uv_loop_t *loop, const std::string &name);
  ~LoopPlane();  // after close() and a final uv_run: drains forced closes, then ends UCX
  Worker &worker() { return *worker_; }
  UvProgress &progress() { return *progress_; }
  const std::shared_ptr<BlobTally> &tally() const { return tally_; }
  void close() { progress_->close(); }

 private:
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<UvProgress> progress_;
  std::shared_ptr<BlobTally> tally_ = std::make_shared<BlobTally>();
};

// Blob ids with this bit are the service's to give (a run's outputs); clients never put them.
inline constexpr uint64_t kServiceBlobBit = uint64_t{1} << 63;

inline uint64_t tag_space_of(uint64_t client_id) {
  return client_id << 32;
}

class BlobHost {
 public:
  static constexpr size_t kMaxPutsInFlight = 1024;  // per client
  // A put's bytes must come within put_timeout_s plus their size at this rate: a large blob from
  // a remote client crosses the network (and its relay) before the receive can match it.
  static constexpr double kSlowestBytesPerSecond = 8.0 * (1 << 20);
  using Reply = std::function<void(const std::string &error)>;  // "" when it went well

  // Connects to the client's worker. `who` names the client in errors; `on_error` runs when
  // UCX reports the endpoint failed. Throws gf::Error.
  BlobHost(LoopPlane &plane, uint64_t client_id, std::string who,
           const std::vector<uint8_t> &client_address, uint64_t cap, double put_timeout_s,
           Endpoint::OnError on_error);
  ~BlobHost();  // close()

  // No refusal and the receive posted (`done` runs once the bytes are in, or with why not), or
  // why the put is refused (then `done` never runs).
  Refusal put(uint64_t blob, uint64_t size, uint64_t tag, double now, Reply done);
  // Receives into nothing the bytes of a put refused after the client sent them: UCX ends a
  // receive shorter than its message with MESSAGE_TRUNCATED and still completes the sender's
  // send, eager or rendezvous. False when it must not (the tag is not this client's, or is in use
  // and its bytes may be another transfer's) or cannot (kMaxPutsInFlight drains wait already).
  // Drains never expire: the client was told its bytes are drained and waits for its send to
  // end (through a relay the bytes may take long to come); close() cancels what is left.
  bool drain(uint64_t tag);
  // No refusal, `size` set and the send posted (`done` runs when it ends), or why not.
  Refusal get(uint64_t blob, uint64_t tag, uint64_t &size, Reply done);
  bool drop(uint64_t blob);
  // The blob, no longer this client's (null when there is none): a graph document being read.
  std::shared_ptr<Blob> take(uint64_t blob);
  // Makes `bytes` blob `blob` of this client (a run's output), charged to its cap: or why not.
  Refusal adopt(uint64_t blob, std::shared_ptr<Blob> bytes);
  // Fails puts whose bytes did not come by their deadline (a client announcing and not sending,
  // or sending with another tag).
  void expire(double now);
  // Cancels what is in flight, closes the endpoint (forced), frees every blob. Idempotent.
  void close(const std::string &why);
  // Whether close() ran: its transfers fail, and the client may open a new data plane.
  bool closed() const;
  uint64_t bytes() const;
  std::string transports() const { return ep_ ? ep_->transports() : std::string(); }

 private:
  struct State;
  Refusal check(uint64_t tag) const;  // the plane open, the tag this client's and free
  LoopPlane &plane_;
  uint64_t client_id_;
  double put_timeout_s_;
  std::unique_ptr<Endpoint> ep_;
  std::shared_ptr<State> state_;  // shared with completions that may run after close
};

}  // namespace gf::transport
