// One process's connection to the node's gpuflow service: the session that carries it
// (client/session.hpp: socket, handshake, reader thread, request ids) and the three protocols
// on top, each with its own state: leases (client/leases.hpp), blobs over the data plane
// (client/blobs.hpp) and graphs that run in the service (client/runs.hpp).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "client/blobs.hpp"
#include "client/endpoint.hpp"
#include "client/leases.hpp"
#include "client/runs.hpp"
#include "client/session.hpp"

namespace gf::client {

class Connection {
 public:
  // Connects and shakes hands within `timeout_ms`. Throws gf::Error: GF_ERR_SYSTEM naming the
  // endpoint when nothing listens there or it answers with something else.
  // `on_behalf_of`: the client id this connection leases for; honoured only when this process is
  // the service itself (its pools for graphs that run inside it).
  // A "tcp://HOST:PORT" endpoint is a service on another host (docs/service.md, "Remote
  // clients"): the Hello carries the token of `token_file` (empty: $GPUFLOW_TOKEN_FILE), and the
  // data plane goes over UCX's TCP on the device the connection takes.
  // `closed`: called once, on the thread that saw it, when the service ends the connection (not
  // when this process does).
  static std::shared_ptr<Connection> open(const std::string &endpoint, const std::string &name,
                                          double weight, int timeout_ms = 5000,
                                          uint64_t on_behalf_of = 0,
                                          const std::string &token_file = "",
                                          std::function<void()> closed = {});
  ~Connection();
  Connection(const Connection &) = delete;
  Connection &operator=(const Connection &) = delete;

  const std::string &endpoint() const { return session_->endpoint(); }
  // A service on another host (tcp://): its devices are not this host's.
  bool remote() const { return session_->remote(); }
  const Welcome &welcome() const { return session_->welcome(); }
  bool alive() const { return session_->alive(); }
  // Why it ended (meaningful once !alive()).
  Closing closing() const { return session_->closing(); }

  LeaseClient &leases() { return leases_; }
  BlobClient &blobs() { return blobs_; }
  RunClient &runs() { return runs_; }

 private:
  Connection(std::unique_ptr<Session> session, std::function<void()> closed);

  std::unique_ptr<Session> session_;
  BlobClient blobs_;
  RunClient runs_;  // after blobs_: it hands reports nobody waits for back through them
  LeaseClient leases_;
};

}  // namespace gf::client
