#include "service/plane_handler.hpp"

#include <unistd.h>

#include <algorithm>

#include "core/error.hpp"
#include "service/remote_access.hpp"
#include "transport/hex.hpp"

namespace gf::service {

namespace fb = flatbuffers;

void PlaneHandler::on_data_plane_hello(Client &c, const wire::DataPlaneHello &m) {
  const uint64_t id = m.request_id();
  if (!plane_ && error_.empty()) {
    try {
      plane_ = std::make_unique<transport::LoopPlane>(w_.loop, "gpuflow-serve");
    } catch (const Error &e) {
      error_ = e.what();
      w_.log("no data plane: " + error_);
    }
  }
  if (!plane_) {
    return c.send_error(id, GF_ERR_STATE, "this service has no data plane: " + error_);
  }
  if (c.plane.pending_request != 0) {
    return c.send_error(id, GF_ERR_STATE, "your data plane is being opened already");
  }
  // A client asks again once its side of the data plane failed (its relay died, a send it
  // could not end): the old one goes, with its blobs, and a new one starts.
  if (c.plane.blobs || c.plane.relay) {
    if (c.plane.blobs && !c.plane.blobs->closed()) {
      w_.log(c.who() + ": asked for a new data plane; the old one goes, " +
             std::to_string(c.plane.blobs->bytes()) + " blob byte(s) freed");
      c.plane.blobs->close("replaced by a new data plane at the client's request");
      if (c.closing) return;  // answering its puts found its socket full: dropped
    }
    c.plane.relay.reset();
    c.plane.blobs.reset();
  }
  // UCX's shared memory is reached through /proc/PID/fd and process_vm_readv: both need the
  // peer to be ptrace-able, i.e. the same user. Another user would fail deep in UCX's wire-up;
  // it is told here instead. (A remote client's uid is the service's: its relay is.)
  if (c.peer.uid != ::geteuid()) {
    w_.log(c.who() + ": data plane refused: uid " + std::to_string(c.peer.uid) +
           " is not the service's (" + std::to_string(::geteuid()) + ")");
    return c.send_error(id, GF_ERR_STATE,
                        "the data plane is only for processes of the service's own user (uid " +
                            std::to_string(::geteuid()) + "; you are uid " +
                            std::to_string(c.peer.uid) +
                            "): UCX's shared memory is owner-only (docs/transport.md, Trust)");
  }
  const auto *address = m.worker_address();
  if (!address || address->size() < 8 || address->size() > 4096) {
    return c.send_error(id, GF_ERR_INVALID_ARGUMENT,
                        "a DataPlaneHello needs a UCX worker address of 8 to 4096 bytes");
  }
  if (!c.peer.on_this_host()) return start_relay(c, id, {address->begin(), address->end()});
  open_blobs(c, id, {address->begin(), address->end()}, transport::kTransports);
}

// A remote client's data plane goes through a gpuflow-relay child, which holds the TCP side:
// the relay's shared-memory worker stands in for the client's.
void PlaneHandler::start_relay(Client &c, uint64_t request, std::vector<uint8_t> address) {
  const std::string program = relay_program();
  if (program.empty()) {
    return c.send_error(request, GF_ERR_SYSTEM,
                        "this service cannot serve a remote data plane: gpuflow-relay was not "
                        "found (set GPUFLOW_RELAY to its path)");
  }
  const std::string net_device = c.net_device();
  if (net_device.empty()) {
    return c.send_error(request, GF_ERR_SYSTEM,
                        "no network device of this host has the address the connection from " +
                            c.peer.address + " came to (a NAT or virtual address?)");
  }
  // What the client chose TLS for would cross the network in clear: only where the site says
  // that network is its own.
  if (c.peer.tls && std::find(w_.trusted_devices.begin(), w_.trusted_devices.end(), net_device) ==
                        w_.trusted_devices.end()) {
    w_.log(c.who() + ": data plane refused: " + net_device + " is not a trusted device");
    return c.send_error(request, GF_ERR_STATE,
                        "the remote data plane is UCX over TCP, which is not encrypted, and this "
                        "connection came in on " +
                            net_device +
                            ", which the service does not trust with it (gpuflow serve "
                            "--trusted-data-device " +
                            net_device + " allows it); the control connection stays TLS");
  }
  const ClientId client = c.id;
  const std::string input =
      transport::to_hex(plane_->worker().address()) + " " + transport::to_hex(address) + "\n";
  c.plane.pending_request = request;
  w_.deadlines.set(Deadline::kRelayStart, client, 0, w_.now() + kRelayStartTimeout_s);
  // Whichever comes first, the relay's addresses or its end, settles the request.
  auto settled = [this, client]() -> Client * {
    Client *k = w_.clients.find(client);
    if (!k) return nullptr;
    k->plane.pending_request = 0;
    w_.deadlines.clear(Deadline::kRelayStart, client);
    return k;
  };
  try {
    c.plane.relay = RelayProcess::start(
        w_.loop, program,
        {"--net-device", net_device, "--max-message", std::to_string(w_.blob_cap), "--tag-space",
         std::to_string(c.id), "--peer", c.who()},
        input,
        [this, settled, request](RelayProcess::Addresses a) {
          Client *k = settled();
          if (!k) return;
          if (a.toward_service.empty() || a.toward_client.empty()) {
            k->plane.relay.reset();
            return k->send_error(request, GF_ERR_SYSTEM,
                                 "the data-plane relay did not give its addresses");
          }
          open_blobs(*k, request, a.toward_service, "tcp (relayed)", a.toward_client);
        },
        [this, settled, request](const std::string &why) {
          Client *k = settled();
          if (!k) return;
          w_.log(k->who() + ": " + why);
          k->plane.relay.reset();  // lets a later DataPlaneHello start another
          if (k->plane.blobs) {
            k->plane.blobs->close(why);  // its transfers fail naming it; the connection stays
          } else {
            k->send_error(request, GF_ERR_SYSTEM, why);
          }
        });
  } catch (const Error &e) {
    c.plane.pending_request = 0;
    w_.deadlines.clear(Deadline::kRelayStart, client);
    w_.log(c.who() + ": data plane refused: " + e.what());
    return c.send_error(request, GF_ERR_SYSTEM, e.what());
  }
}

void PlaneHandler::relay_late(ClientId id) {
  Client *c = w_.clients.find(id);  // an earlier one's error may have dropped it
  if (!c || c->plane.pending_request == 0) return;
  const std::string why = "its data-plane relay gave no addresses within " +
                          amount_text(kRelayStartTimeout_s) + " s: stopped";
  w_.log(c->who() + ": " + why);
  const uint64_t request = c->plane.pending_request;
  c->plane.pending_request = 0;
  c->plane.relay.reset();
  c->send_error(request, GF_ERR_SYSTEM, why);
}

// The client's blobs, reached at `address` (its worker, or its relay's); answers
// DataPlaneWelcome with `welcome_address` (the service's worker, or the relay's TCP one).
void PlaneHandler::open_blobs(Client &c, uint64_t request, const std::vector<uint8_t> &address,
                              const std::string &transports, std::vector<uint8_t> welcome_address) {
  const ClientId client = c.id;
  try {
    c.plane.blobs = std::make_unique<transport::BlobHost>(*plane_, c.id, c.who(), address,
                                                          w_.blob_cap, w_.blob_put_timeout_s,
                                                          [this, client](const std::string &why) {
                                                            // Its transfers fail naming it; the
                                                            // control connection (and its leases)
                                                            // stay: a client that died is dropped
                                                            // when its socket closes.
                                                            Client *k = w_.clients.find(client);
                                                            if (!k || !k->plane.blobs) return;
                                                            w_.log(k->who() + ": " + why);
                                                            k->plane.blobs->close(why);
                                                          });
  } catch (const Error &e) {
    w_.log(c.who() + ": data plane refused: " + e.what());
    c.plane.relay.reset();
    return c.send_error(request, GF_ERR_SYSTEM, e.what());
  }
  w_.log(c.who() + " has a data plane (" + transports + ")");
  fb::FlatBufferBuilder b;
  const std::vector<uint8_t> &mine =
      welcome_address.empty() ? plane_->worker().address() : welcome_address;
  c.send(
      wire::frame_of(b, wire::CreateDataPlaneWelcome(b, request, b.CreateVector(mine), w_.blob_cap,
                                                     b.CreateString(transports), true)));
  plane_->progress().kick();
}

// A transfer's answer, later, to a client that may have gone meanwhile.
transport::BlobHost::Reply PlaneHandler::later(Client &c, uint64_t request,
                                               std::function<void(Client &)> ok) {
  return [this, client = c.id, request, ok = std::move(ok)](const std::string &error) {
    Client *k = w_.clients.find(client);
    if (!k) return;
    if (!error.empty()) {
      w_.log(k->who() + ": " + error);
      return k->send_error(request, GF_ERR_SYSTEM, error);
    }
    ok(*k);
  };
}

bool PlaneHandler::require_plane(Client &c, uint64_t request) {
  if (c.plane.blobs) return true;
  c.send_error(request, GF_ERR_STATE, "no data plane: send DataPlaneHello first");
  return false;
}

void PlaneHandler::on_blob_put(Client &c, const wire::BlobPut &m) {
  if (!require_plane(c, m.request_id())) return;
  const uint64_t request = m.request_id(), blob = m.blob_id(), size = m.size();
  const Refusal refused = c.plane.blobs->put(
      blob, size, m.tag(), w_.now(), later(c, request, [=](Client &k) {
        fb::FlatBufferBuilder b;
        k.send(wire::frame_of(b, wire::CreateBlobStored(b, request, blob, size)));
      }));
  fb::FlatBufferBuilder b;
  if (!refused) {
    if (!m.bytes_follow()) c.send(wire::frame_of(b, wire::CreateBlobPutReady(b, request)));
  } else {
    w_.log(c.who() + ": put refused: " + refused.why);
    if (!m.bytes_follow()) return c.send_error(request, refused);
    // The bytes are on their way already: received into nothing, where that is safe.
    const bool drained = c.plane.blobs->drain(m.tag());
    c.send(wire::frame_of(b, wire::CreateBlobRefused(b, request, refused.status,
                                                     b.CreateString(refused.why), drained)));
  }
  plane_->progress().kick();
}

void PlaneHandler::on_blob_get(Client &c, const wire::BlobGet &m) {
  if (!require_plane(c, m.request_id())) return;
  const uint64_t request = m.request_id();
  uint64_t size = 0;
  const Refusal refused =
      c.plane.blobs->get(m.blob_id(), m.tag(), size, later(c, request, [](Client &) {}));
  if (refused) return c.send_error(request, refused);
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(b, wire::CreateBlobSending(b, request, m.blob_id(), size)));
  plane_->progress().kick();
}

void PlaneHandler::on_blob_drop(Client &c, const wire::BlobDrop &m) {
  if (!require_plane(c, m.request_id())) return;
  if (!c.plane.blobs->drop(m.blob_id())) {
    return c.send_error(m.request_id(), GF_ERR_NOT_FOUND, "no blob " + std::to_string(m.blob_id()));
  }
  // A run's report goes with the outputs it lists.
  if (auto run = c.plane.run_blobs.find(m.blob_id()); run != c.plane.run_blobs.end()) {
    for (uint64_t id : run->second) c.plane.blobs->drop(id);
    c.plane.run_blobs.erase(run);
  }
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(b, wire::CreateBlobDropped(b, m.request_id(), m.blob_id())));
}

void PlaneHandler::expire_transfers(double t) {
  // By id: an expiry's answer may drop its client (and so change the table).
  std::vector<ClientId> with_blobs;
  for (const auto &[id, c] : w_.clients.all())
    if (c->plane.blobs) with_blobs.push_back(id);
  for (ClientId id : with_blobs) {
    Client *c = w_.clients.find(id);
    if (c && c->plane.blobs) c->plane.blobs->expire(t);
  }
}

std::string PlaneHandler::client_gone(Client &c, const std::string &reason) {
  std::string tail;
  if (c.plane.blobs) {
    tail = "; data plane closed, " + std::to_string(c.plane.blobs->bytes()) + " blob byte(s) freed";
    // Closed, not freed: the departure may come inside one of the BlobHost's own callbacks (an
    // answer that finds this client's socket full), so it goes with the Client, later.
    c.plane.blobs->close(reason);
  }
  c.plane.relay.reset();
  return tail;
}

}  // namespace gf::service
