// A client of the service as its handlers see it: who it is (settled once, peer.hpp), what it
// told in its Hello, what each concern keeps for it, and how to answer it. No socket in sight:
// connection.hpp puts one behind `send` and `drop`, and tests put a recorder there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/refusal.hpp"
#include "service/job_processes.hpp"
#include "service/lease_book.hpp"
#include "service/peer.hpp"
#include "service/relay_process.hpp"
#include "transport/blob_host.hpp"

namespace gf::service {

// What handlers are given to write log lines (one line each, unescaped: the service escapes) and
// to read the service's clock (seconds since it started; the book's clock).
using Log = std::function<void(const std::string &line)>;
using Clock = std::function<double()>;

// What the data plane (plane_handler.hpp) keeps for one client.
struct ClientPlane {
  std::unique_ptr<transport::BlobHost> blobs;           // once it asked for a data plane
  std::unique_ptr<RelayProcess> relay;                  // remote: the child carrying it
  uint64_t pending_request = 0;                         // a DataPlaneHello waiting for its relay
  std::map<uint64_t, std::vector<uint64_t>> run_blobs;  // a run's report blob -> its outputs
};

class Client {
 public:
  Client() = default;
  virtual ~Client() = default;
  Client(const Client &) = delete;
  Client &operator=(const Client &) = delete;

  // Queues a frame. A client that does not read its replies is dropped rather than let the
  // service's memory grow; nothing is sent once it is closing.
  virtual void send(std::vector<uint8_t> frame) = 0;
  // Ends it: what it held goes back (the service's departure hook), with `reason` logged. With
  // `flush`, frames already queued (an Error saying why, a Goodbye) go first.
  virtual void drop(const std::string &reason, bool flush = true) = 0;
  // The network device a remote client's connection came in through (its relay is kept to it);
  // empty on this host, or when not found.
  virtual std::string net_device() const { return {}; }

  void send_error(uint64_t request, gf_status status, const std::string &message);
  void send_error(uint64_t request, const Refusal &refused) {
    send_error(request, refused.status, refused.why);
  }
  // "client 3 (pid 42, alice, 'train')": how log lines name it.
  std::string who() const;
  HolderProcess holder() const { return {peer.pid, peer.start, peer.uid, peer.user, name}; }

  ClientId id = 0;  // given when it is let in
  Peer peer;
  bool greeted = false;
  bool closing = false;
  std::string name;  // from Hello
  double weight = 1;
  bool warned_full = false;  // its lease requests hit a bound, and the log said so once
  ClientPlane plane;
};

// The clients connected now, by id (greeted or not; none that is closing).
class ClientTable {
 public:
  Client *find(ClientId id) const {
    auto it = clients_.find(id);
    return it == clients_.end() ? nullptr : it->second;
  }
  void add(Client &c) { clients_[c.id] = &c; }
  void remove(ClientId id) { clients_.erase(id); }
  const std::map<ClientId, Client *> &all() const { return clients_; }
  // Ids of clients and of the book's other clients (keepers of jobs): never reused.
  ClientId next_id() { return next_id_++; }

 private:
  std::map<ClientId, Client *> clients_;
  ClientId next_id_ = 1;
};

// "%g": amounts (shares, CPUs, seconds) as log lines and replies show them.
std::string amount_text(double v);

}  // namespace gf::service
