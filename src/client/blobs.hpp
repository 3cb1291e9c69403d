// The data plane on a connection to the service (docs/transport.md): blobs held by the service,
// whose bytes go over UCX (transport/client_plane) while the control channel only says what
// moves. Its own state is the UCX plane, which a failed one is replaced by, and the service's
// terms for it (the cap, whether bytes may follow a put unasked).
//
// Every call throws gf::Error: GF_ERR_STATE when the service offers no data plane (or not to
// this user), the service's status when it refuses a request (GF_ERR_INVALID_ARGUMENT over the
// cap or for a bad tag, GF_ERR_NOT_FOUND for an unknown blob, …), GF_ERR_SYSTEM naming the
// service when the data plane failed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/session.hpp"
#include "transport/client_plane.hpp"

namespace gf::client {

class BlobClient {
 public:
  explicit BlobClient(Session &session);  // registers with it: before Session::start()

  // Starts the data plane; later calls do nothing, unless `failed` is the one there: then a
  // new one replaces it. The blob calls start it themselves.
  void open_data_plane(const std::shared_ptr<transport::ClientPlane> &failed = nullptr);
  // A put on a data plane that failed first replaces it (the old one's blobs are gone with it).
  void put(uint64_t blob_id, const void *data, size_t size);
  std::vector<uint8_t> get(uint64_t blob_id);
  void drop_blob(uint64_t blob_id);
  // Drops a blob without waiting for the answer (from threads that must not block). Never throws.
  void forget_blob(uint64_t blob_id);
  // A put in two steps: announce (the service makes room and posts its receive), then send.
  // `tag` 0 picks the next one of this client's tag space.
  struct PutTicket {
    uint64_t request_id = 0, blob_id = 0, size = 0, tag = 0;
  };
  PutTicket announce_put(uint64_t blob_id, uint64_t size, uint64_t tag = 0);
  void finish_put(const PutTicket &ticket, const void *data);
  // What UCX picked for the endpoint to the service ("posix/memory,cma/memory").
  std::string data_plane_transports();
  uint64_t blob_cap();
  uint64_t next_tag() { return (session_.welcome().client_id << 32) | (next_tag_++ & 0xffffffffu); }
  // A blob id of this client's own (the service's ids have the top bit set).
  uint64_t next_blob_id() { return next_blob_++; }

 private:
  std::shared_ptr<transport::ClientPlane> plane();
  std::shared_ptr<transport::ClientPlane> working_plane();  // plane(), or why it just failed
  // Throws GF_ERR_INVALID_ARGUMENT for a blob larger than the service's cap for one client
  // (DataPlaneWelcome.blob_cap): it could never be stored. put() checks; announce_put leaves
  // the refusal to the service.
  void check_blob_size(uint64_t blob_id, uint64_t size);
  // Session::ask with the answer deadline of control requests.
  std::vector<uint8_t> ask(uint64_t id, const std::vector<uint8_t> &frame, wire::Body expected,
                           const char *what);

  Session &session_;
  std::mutex plane_mu_;  // serialises open_data_plane
  std::mutex mu_;
  std::shared_ptr<transport::ClientPlane> plane_;  // under mu_; replaced once it failed
  uint64_t blob_cap_ = 0;                          // under mu_
  bool bytes_follow_puts_ = false;  // under mu_: the service's DataPlaneWelcome says so
  std::atomic<uint64_t> next_tag_{1};
  std::atomic<uint64_t> next_blob_{uint64_t{1} << 62};  // clear of ids callers pick by hand
};

}  // namespace gf::client
