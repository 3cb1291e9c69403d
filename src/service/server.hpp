// The node's gpuflow service: a libuv loop on its own thread that accepts clients on a unix
// socket, learns who each one is from the socket's peer credentials, and answers their control
// messages (wire/wire.fbs) from one LeaseBook. Every frame is verified before it is read; a
// client that sends garbage, messages out of order, or stops reading is disconnected with a
// logged reason, and everything it held goes back to the book. Nothing a client does blocks the
// loop: writes are queued, and a client whose queue grows past a bound is cut off.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tls.hpp"
#include "pool/pool_options.hpp"
#include "service/book_snapshot.hpp"
#include "service/lease_book.hpp"

namespace gf::service {

struct ServiceOptions {
  PoolOptions pool;         // the devices to serve (and cpu_workers as the CPUs to lease)
  std::string socket_path;  // empty: client::default_socket_path()
  std::string group;        // empty: socket 0600; else 0660 owned by this group
  // A unix socket already listening, handed over by systemd's socket activation: accepted on
  // instead of binding socket_path (and group); its file is never removed. -1: none.
  int listen_fd = -1;
  Policy policy;
  std::function<void(const std::string &line)> log;  // empty: standard error
  // The data plane (docs/transport.md): bytes of blobs one client may hold at once, and how long
  // the service waits for a put's bytes once it said "send".
  uint64_t blob_cap = uint64_t{1} << 30;
  double blob_put_timeout_s = 30;
  // Kernel plugins that graphs run inside the service may name (gpuflow serve --plugin).
  std::vector<std::string> plugins;
  // Remote clients (gpuflow serve --listen): "HOST:PORT" to accept TCP connections on, and the
  // token file whose token they must show (created when missing). Empty: unix socket only.
  std::string listen;
  std::string token_file;
  // TLS for them (docs/service.md, "TLS"): the service's certificate and key, and optionally the
  // CA whose client certificates say who a remote user is (mutual TLS). Plain TCP instead only
  // with insecure_listen (then tls stays empty).
  tls::ServerFiles tls;
  bool insecure_listen = false;
  // Network devices on which a TLS client's data plane (UCX's TCP, not encrypted) may run.
  std::vector<std::string> trusted_data_devices;
  // How long an orphaned job (its lease's holder went; docs/service.md, "A lease owns its job")
  // has between SIGTERM and SIGKILL.
  double job_kill_grace_s = 10;
  // A delegated cgroup v2 subtree for the jobs (job_cgroups.hpp); empty: the service's own cgroup
  // when systemd delegated it, else none.
  std::string cgroup_root;
};

class Server {
 public:
  // Binds the socket and starts the loop; returns once clients can connect. Throws gf::Error.
  static std::unique_ptr<Server> start(ServiceOptions options);
  ~Server();  // stop()
  Server(const Server &) = delete;
  Server &operator=(const Server &) = delete;

  // Tells every client goodbye, ends every lease, removes the socket file, joins the thread.
  // Idempotent.
  void stop();
  // Replaces the lease book's policy on the loop (LeaseBook::set_policy), logs what changed and
  // runs a scheduling pass; returns once done. Throws gf::Error: what set_policy refuses,
  // GF_ERR_INVALID_HANDLE once stop() began, GF_ERR_STATE from the loop's own thread (a log
  // callback), which would wait on itself.
  void update_policy(Policy policy);
  const std::string &endpoint() const;
  // "tcp://HOST:PORT" where remote clients connect (the port actually bound); empty when none.
  const std::string &remote_endpoint() const;

  // The lease book as of the last refresh (every 250 ms on the loop), for dashboards and
  // metrics on other threads. Never null once started.
  using BookSnapshot = service::BookSnapshot;
  std::shared_ptr<const BookSnapshot> book_snapshot() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gf::service
