// The data plane of the service (docs/transport.md): a client's DataPlaneHello opens its blobs
// (BlobHost) on the service's UCX worker, directly for a client on this host and through a
// gpuflow-relay child for a remote one; BlobPut, BlobGet and BlobDrop move and free them. UCX is
// loaded by the first client that asks: a service nobody asks never loads it.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "service/client.hpp"
#include "service/deadlines.hpp"
#include "transport/blob_host.hpp"
#include "wire/framing.hpp"

namespace gf::service {

class PlaneHandler {
 public:
  struct Collaborators {
    uv_loop_t *loop;  // the plane's worker and the relays run on it
    uint64_t blob_cap;
    double blob_put_timeout_s;
    const ClientTable &clients;
    Deadlines &deadlines;
    Log log;
    Clock now;
    // The network devices on which a TLS client's data plane (UCX's TCP, not encrypted) may run.
    std::vector<std::string> trusted_devices;
  };
  explicit PlaneHandler(Collaborators with) : w_(std::move(with)) {
    w_.deadlines.on_due(Deadline::kRelayStart, [this](ClientId id, uint64_t) { relay_late(id); });
  }
  PlaneHandler(const PlaneHandler &) = delete;
  PlaneHandler &operator=(const PlaneHandler &) = delete;

  void on_data_plane_hello(Client &c, const wire::DataPlaneHello &m);
  void on_blob_put(Client &c, const wire::BlobPut &m);
  void on_blob_get(Client &c, const wire::BlobGet &m);
  void on_blob_drop(Client &c, const wire::BlobDrop &m);

  // Whether `c` has a data plane; when not, its request is answered with an Error saying so.
  bool require_plane(Client &c, uint64_t request);
  // What Welcome says: whether DataPlaneHello may be answered (false once UCX failed to start).
  bool offered() const { return error_.empty(); }
  // The blobs of all clients (null before the plane started).
  std::shared_ptr<transport::BlobTally> tally() const { return plane_ ? plane_->tally() : nullptr; }
  uint64_t blob_bytes() const { return plane_ ? plane_->tally()->bytes.load() : 0; }

  // Fails puts whose bytes did not come in time (BlobHost::expire).
  void expire_transfers(double t);
  // `c` went (`reason`): its blobs are freed and its relay stopped. Returns the tail of its
  // departure's log line.
  std::string client_gone(Client &c, const std::string &reason);
  // The service stops: the plane's handles close now; what UCX still holds goes in release(),
  // after the loop's last run.
  void close() {
    if (plane_) plane_->close();
  }
  void release() { plane_.reset(); }

 private:
  // Its relay gave no addresses in time (kRelayStartTimeout_s): stopped, the request failed.
  void relay_late(ClientId id);
  void start_relay(Client &c, uint64_t request, std::vector<uint8_t> address);
  void open_blobs(Client &c, uint64_t request, const std::vector<uint8_t> &address,
                  const std::string &transports, std::vector<uint8_t> welcome_address = {});
  transport::BlobHost::Reply later(Client &c, uint64_t request, std::function<void(Client &)> ok);

  Collaborators w_;
  // From the first DataPlaneHello on; null before, or when UCX could not start (error_ says why).
  std::unique_ptr<transport::LoopPlane> plane_;
  std::string error_;
};

}  // namespace gf::service
