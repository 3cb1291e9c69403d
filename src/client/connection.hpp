// One process's connection to the node's gpuflow service: the Hello/Welcome handshake, then
// requests answered by id. A reader thread takes every frame the service sends, verifies it and
// hands answers to the threads waiting for them; when the service goes away (closed socket,
// Goodbye, garbage) every waiting call fails at once with an error naming the endpoint.
//
// Plain blocking POSIX sockets rather than a libuv loop: callers block on their own threads
// (gf_lease_acquire, status), and one reader thread is all the asynchrony a client needs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpuflow.h"
#include "transport/client_plane.hpp"
#include "wire/framing.hpp"
#include "wire/records.hpp"

namespace gf::client {

// "unix:///run/x.sock" or "/run/x.sock" -> the socket path; anything else throws
// GF_ERR_INVALID_ARGUMENT naming the text.
std::string socket_path_of(const std::string &endpoint);
// Where a service listens when told nothing: $XDG_RUNTIME_DIR/gpuflow.sock, else
// /tmp/gpuflow-$UID/gpuflow.sock.
std::string default_socket_path();
// The endpoint a pool connects to: the configured one, else GPUFLOW_POOL; "" for an embedded
// pool ("embedded" in either place means embedded).
std::string resolve_endpoint(const char *configured);

using wire::DeviceSlot;
using wire::Grant;
using wire::LeaseAsk;
using wire::LeasedDevice;

struct Welcome {
  uint64_t client_id = 0;
  uint32_t service_pid = 0;
  std::vector<DeviceSlot> devices;
  double cpus = 0;
  std::string backend;
  double emulated_bandwidth = 0;
  bool data_plane = false;            // the service answers DataPlaneHello
  std::vector<std::string> kernels;   // named kernels of the service's plugins
  bool binds_process_groups = false;  // the service answers LeaseBind
};

class Connection {
 public:
  // Connects and shakes hands within `timeout_ms`. Throws gf::Error: GF_ERR_SYSTEM naming the
  // endpoint when nothing listens there or it answers with something else.
  // `on_behalf_of`: the client id this connection leases for; honoured only when this process is
  // the service itself (its pools for graphs that run inside it).
  // A "tcp://HOST:PORT" endpoint is a service on another host (docs/service.md, "Remote
  // clients"): the Hello carries the token of `token_file` (empty: $GPUFLOW_TOKEN_FILE), and the
  // data plane goes over UCX's TCP on the device the connection takes.
  static std::shared_ptr<Connection> open(const std::string &endpoint, const std::string &name,
                                          double weight, int timeout_ms = 5000,
                                          uint64_t on_behalf_of = 0,
                                          const std::string &token_file = "");
  ~Connection();
  Connection(const Connection &) = delete;
  Connection &operator=(const Connection &) = delete;

  const std::string &endpoint() const { return endpoint_; }
  // A service on another host (tcp://): its devices are not this host's.
  bool remote() const { return !net_device_.empty(); }  // set for every tcp:// connection
  const Welcome &welcome() const { return welcome_; }

  // Waits for a lease (timeout_ms < 0: as long as it takes). Throws gf::Error with the
  // service's status (GF_ERR_INFEASIBLE, GF_TIMEOUT, …) or GF_ERR_SYSTEM when the connection
  // is gone.
  Grant acquire(const LeaseAsk &ask, int64_t timeout_ms);
  // Asks for a lease without waiting: `done` runs once, on the reader thread (or on this one if
  // sending fails), with the grant, or with the status and reason it was not granted.
  using GrantDone =
      std::function<void(const Grant *grant, gf_status status, const std::string &why)>;
  void acquire_async(const LeaseAsk &ask, GrantDone done);
  void release(uint64_t lease_id);
  // Tells the service that `process_group` uses the lease (wire.fbs, LeaseBind): should this
  // process go without releasing it, the lease outlives it until the group is gone. Throws
  // gf::Error with the service's refusal (not this user's group, a remote service, …).
  void bind_process_group(uint64_t lease_id, int32_t process_group);
  // The service's StatusReply, as the verified frame payload.
  std::vector<uint8_t> status();

  bool revoked(uint64_t lease_id) const;
  bool alive() const { return !closed_.load(); }
  // Called on the reader thread when the service asks for a lease back, or (lease 0) when the
  // connection closes. Must be quick. Set before leases are taken.
  void on_revoke(std::function<void(uint64_t lease_id)> callback);

  // ---- The data plane (client/blobs.cpp, docs/transport.md) ----
  // Blobs on the service: the bytes go over UCX, the control channel only says what moves.
  // Every call throws gf::Error: GF_ERR_STATE when the service offers no data plane (or not to
  // this user), GF_ERR_INVALID_ARGUMENT / GF_ERR_NOT_FOUND when it refuses a request (over the
  // cap, unknown blob, bad tag), GF_ERR_SYSTEM naming the service when the data plane failed.
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
  uint64_t next_tag() { return (welcome_.client_id << 32) | (next_tag_++ & 0xffffffffu); }
  // A blob id of this client's own (the service's ids have the top bit set).
  uint64_t next_blob_id() { return next_blob_++; }

  // ---- Graphs that run in the service (client/runs.cpp) ----
  // `finished` runs once, on the reader thread: with the verified RunFinished message, or with
  // null and why when the connection closed first. It must be quick.
  using RunDone = std::function<void(const std::vector<uint8_t> *payload, const std::string &why)>;
  // Called on the reader thread with each verified RunProgress message while the run runs.
  using RunProgressed = std::function<void(const std::vector<uint8_t> &payload)>;
  // Submits the graph document in blob `document_blob` as run `run_id` (commands start in
  // `working_directory` or relative to it, and log to `log_directory` unless they say where).
  // Returns the run's task count once the service accepted it; throws its refusal (then
  // `finished` never runs).
  uint64_t submit_graph(uint64_t run_id, uint64_t document_blob,
                        const std::string &working_directory, const std::string &log_directory,
                        RunDone finished, RunProgressed progressed = {});
  // Asks the service to cancel the run; its RunFinished follows. Never throws: a gone service
  // has ended the run already.
  void cancel_run(uint64_t run_id);
  uint64_t next_run_id() { return next_run_++; }

 private:
  struct Reply {
    bool done = false;
    std::vector<uint8_t> payload;  // a verified Message
    // Set for asynchronous requests: called with the answer (or nullptr and why, when the
    // connection closes first) instead of waking a waiting thread.
    std::function<void(const std::vector<uint8_t> *payload, const std::string &why)> callback;
  };
  Connection(std::string endpoint, int fd);
  void handshake(const std::string &name, double weight, int timeout_ms, uint64_t on_behalf_of,
                 const std::string &token);
  // Writes a whole frame. Throws GF_ERR_INVALID_ARGUMENT, sending nothing and leaving the
  // connection as it was, for a frame over the service's limit (wire::kMaxFrame); GF_ERR_SYSTEM
  // once writing fails (the connection is then closed).
  void send(const std::vector<uint8_t> &frame);
  // Why `frame` is too large to send, or "".
  std::string oversized(const std::vector<uint8_t> &frame) const;
  // Sends a request and waits for the answer with its id (deadline_ms < 0: no deadline).
  std::vector<uint8_t> call(uint64_t id, const std::vector<uint8_t> &frame, int64_t deadline_ms);
  // Waits for the answer to `id`, registered in waiting_ beforehand (deadline_ms < 0: none).
  std::vector<uint8_t> await(uint64_t id, int64_t deadline_ms);
  // Sends a request whose answer goes to its waiting_ callback; forgets the callback if sending
  // fails (then throws).
  void send_answered(uint64_t id, const std::vector<uint8_t> &frame);
  // Sends a request (built by `frame` for its id) whose answer nobody waits for; never throws.
  void send_unanswered(
      const std::function<std::vector<uint8_t>(flatbuffers::FlatBufferBuilder &, uint64_t)> &frame);
  std::shared_ptr<transport::ClientPlane> plane();
  // Throws GF_ERR_INVALID_ARGUMENT for a blob larger than the service's cap for one client
  // (DataPlaneWelcome.blob_cap): it could never be stored. put() checks; announce_put leaves
  // the refusal to the service.
  void check_blob_size(uint64_t blob_id, uint64_t size);
  std::shared_ptr<transport::ClientPlane> working_plane();  // plane(), or why it just failed
  void read_loop();
  std::vector<uint8_t> lease_request_frame(uint64_t id, const LeaseAsk &ask, int64_t timeout_ms);
  // Decodes an answer to a lease request: true and `grant`, or false and why not.
  bool grant_of(const std::vector<uint8_t> &payload, Grant &grant, gf_status &status,
                std::string &why) const;
  void close_with(const std::string &reason);
  [[noreturn]] void fail_gone() const;

  const std::string endpoint_;
  const int fd_;
  std::string net_device_;  // remote services: the local device the connection goes through
  Welcome welcome_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex write_mu_;
  mutable std::mutex mu_;
  std::condition_variable replied_;
  std::map<uint64_t, Reply> waiting_;
  std::set<uint64_t> abandoned_;  // acquire gave up: a late grant is handed straight back
  std::set<uint64_t> revoked_;
  std::function<void(uint64_t)> on_revoke_;
  std::atomic<bool> closed_{false};
  std::string close_reason_;
  // "the gpuflow service at … is gone: <close_reason_>"; mu_ held.
  std::string gone() const {
    return "the gpuflow service at " + endpoint_ + " is gone: " + close_reason_;
  }
  // Errors that come for a request after its first answer (a get whose send failed later).
  std::map<uint64_t, std::function<void(const std::string &why)>> watchers_;  // under mu_
  std::mutex plane_mu_;                            // serialises open_data_plane
  std::shared_ptr<transport::ClientPlane> plane_;  // under mu_ too; replaced once it failed
  uint64_t blob_cap_ = 0;
  bool bytes_follow_puts_ = false;  // the service's DataPlaneWelcome says so
  std::atomic<uint64_t> next_tag_{1};
  std::atomic<uint64_t> next_blob_{uint64_t{1} << 62};  // clear of ids callers pick by hand
  std::atomic<uint64_t> next_run_{1};
  struct RunWatch {
    RunDone done;
    RunProgressed progressed;
    bool accepted = false;  // RunAccepted came: only then does a closing connection end it
  };
  std::map<uint64_t, RunWatch> runs_;  // runs in the service, by run id; under mu_
  std::thread reader_;
};

}  // namespace gf::client
