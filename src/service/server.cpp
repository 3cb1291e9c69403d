#include "service/server.hpp"

#include <pthread.h>
#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "client/connection.hpp"
#include "core/display_text.hpp"
#include "core/error.hpp"
#include "core/request_bounds.hpp"
#include "core/utf8.hpp"
#include "pool/backend_choice.hpp"
#include "service/graph_runs.hpp"
#include "service/job_keeper.hpp"
#include "service/job_processes.hpp"
#include "service/listener.hpp"
#include "service/relay_process.hpp"
#include "service/remote_access.hpp"
#include "service/saved_grants.hpp"
#include "service/status_reply.hpp"
#include "transport/blob_host.hpp"
#include "transport/hex.hpp"
#include "wire/framing.hpp"

namespace gf::service {

namespace fb = flatbuffers;

namespace {

// A client whose unsent replies pass this is not reading: it is cut off rather than let the
// service's memory grow.
constexpr size_t kMaxQueuedWrite = 16u << 20;
constexpr uint64_t kTickMs = 20;  // request deadlines are checked this often
// How long a request waits while others hold more than their fair share before the service
// asks them for leases back.
constexpr double kRevokePatience_s = 1.0;
// How long a connection may stay without its Hello (a remote one: with the right token).
constexpr double kHelloTimeout_s = 10.0;
// One client's share of the service's own time and memory (docs/service.md, "Faults"): requests
// it may have waiting, those all clients of one user may have, and the unix-socket connections
// one user may hold open (the service's own pools, for graphs it runs, are not counted).
constexpr size_t kMaxQueuedPerClient = 1024;
constexpr size_t kMaxQueuedPerUser = 4096;
constexpr size_t kMaxConnectionsPerUser = 256;
constexpr size_t kMaxRemoteHello = 16u << 10;
static_assert(bounds::kMaxTokenBytes + 4096 < kMaxRemoteHello,
              "a Hello with the longest token a client may send (GF_MAX_TOKEN_BYTES) fits");
// Remote connections that have not shown the token yet, at most (more are closed at once).
constexpr size_t kMaxRemoteUngreeted = 64;
// How long a relay may take to start and give its addresses.
constexpr double kRelayStartTimeout_s = 10.0;
// How often leases kept for their jobs (job_keeper.hpp) look at their processes.
constexpr uint64_t kJobWatchMs = 250;

std::string str(const fb::String *s) {
  return s ? s->str() : std::string();
}

std::string amount_text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

}  // namespace

struct Client {
  // First: libuv hands callbacks the handle, cast back to the client. A unix socket, or TCP for a
  // remote client.
  union Io {
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  } io;
  uv_stream_t *stream() { return reinterpret_cast<uv_stream_t *>(&io); }
  uv_handle_t *handle() { return reinterpret_cast<uv_handle_t *>(&io); }
  // A remote client (docs/service.md, "Remote clients"): where it is, the network device it came
  // in through, and the relay that carries its data plane.
  bool remote = false;
  std::string address;
  std::string net_device;
  std::unique_ptr<RelayProcess> relay;
  double hello_deadline = 0;   // a client not greeted by then is dropped
  bool warned_full = false;    // its queue is full, and the log said so once
  uint64_t plane_request = 0;  // a DataPlaneHello waiting for its relay (0: none)
  double relay_deadline = 0;   // when that relay must have given its addresses
  struct Server::Impl *server = nullptr;
  ClientId id = 0;
  Peer peer;
  uint64_t peer_start = 0;  // when its process started (jobs::start_time): names it for good
  bool greeted = false;
  bool closing = false;
  wire::FrameReader reader;
  std::map<RequestId, double> deadlines;  // queued requests with a timeout: when they end
  std::string name;
  double weight = 1;
  std::unique_ptr<transport::BlobHost> blobs;           // its data plane, once it asked for one
  std::map<uint64_t, std::vector<uint64_t>> run_blobs;  // a run's report blob -> its outputs
};

struct Server::Impl {
  ServiceOptions options;
  std::string endpoint;
  std::string socket_path;
  uv_loop_t loop{};
  uv_pipe_t listener{};
  // Remote clients (gf_service_config.listen): the TCP listener, its address and the token.
  uv_tcp_t tcp_listener{};
  bool listening_tcp = false;
  std::string remote_endpoint;  // "tcp://HOST:PORT"
  std::string token;
  std::set<Client *> dropped;  // closing: their handles go once libuv is done
  bool warned_ungreeted = false;
  std::set<uint32_t> warned_connections;  // users told once that they hold too many
  uv_async_t wake{};
  uv_timer_t tick{};
  std::thread thread;
  std::unique_ptr<LeaseBook> book;
  // Leases bound to their jobs' process groups, and those kept for jobs whose holder went.
  std::unique_ptr<JobKeeper> jobs;
  // The grants on disk (saved_grants.hpp): rewritten before grants are sent, and at the end of a
  // loop turn that changed them otherwise.
  std::unique_ptr<SavedBookFile> saved;  // null when the files could not be had (logged)
  bool state_dirty = false;
  bool state_warned = false;
  // Work deferred to the end of each loop turn, after all I/O of the turn was read: one
  // scheduling pass for every request, release and departure that came in it (so a flood of
  // requests costs one pass per read, not one per request), then the grants on disk.
  bool schedule_due = false;
  uv_check_t turn_end{};
  // The data plane, from the first DataPlaneHello on; null before, or when UCX could not start
  // (plane_error says why, and Welcome says there is none).
  std::unique_ptr<transport::LoopPlane> plane;
  std::string plane_error;
  std::map<ClientId, Client *> clients;
  ClientId next_client = 1;
  // Graphs run inside the service, and what their sessions tell the loop.
  std::unique_ptr<GraphRuns> graphs;
  uv_async_t news_wake{};
  std::mutex news_mu;
  std::deque<RunNews> news;  // under news_mu
  bool news_open = true;     // under news_mu: false once news_wake is closed
  std::map<std::pair<ClientId, uint64_t>, uint64_t> progress_sent;  // (client, run) -> counts
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  int64_t started_ms = 0;
  std::string backend_name;
  double emulated_bandwidth = 0;
  bool stopping = false;
  double stop_began = 0;
  bool stopped = false;
  uint64_t ticks = 0;
  mutable std::mutex snapshot_mu;
  std::shared_ptr<const Server::BookSnapshot> snapshot;

  void publish_snapshot() {
    auto next = std::make_shared<Server::BookSnapshot>();
    next->now = now();
    next->backend = backend_name;
    const std::vector<uint8_t> frame =
        status_reply_frame(*book, status_context(nullptr), 0, clients_info());
    next->status.assign(frame.begin() + 4, frame.end());  // the payload, past the length
    std::lock_guard lock(snapshot_mu);
    snapshot = std::move(next);
  }

  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  // Every line goes out escaped: lines quote names clients chose (their own, their user's,
  // their leases'), and a control character in one must not act on whoever reads the log.
  void log(const std::string &line) {
    const std::string shown = escaped_for_display(line);
    if (options.log) {
      options.log(shown);
    } else {
      std::fprintf(stderr, "gpuflow serve: %s\n", shown.c_str());
    }
  }
  HolderProcess holder_of(const Client &c) const {
    return HolderProcess{c.peer.pid, c.peer_start, c.peer.uid, c.peer.user, c.name};
  }
  // Writes the grants now. A failure is logged (once) and the service goes on: its leases are
  // then only as safe across a restart as the last file written.
  void save_state() {
    state_dirty = false;
    if (!saved) return;
    try {
      SavedBook book_now = save_grants(
          *book, *jobs,
          [this](ClientId id) {
            auto it = clients.find(id);
            return it == clients.end() ? HolderProcess{} : holder_of(*it->second);
          },
          started_ms);
      this->saved->save(book_now);
      state_warned = false;
    } catch (const Error &e) {
      if (!state_warned) log(std::string("grants not saved: ") + e.what());
      state_warned = true;
    }
  }

  std::string who(const Client &c) const {
    return "client " + std::to_string(c.id) + " (" +
           (c.remote ? "remote, " : "pid " + std::to_string(c.peer.pid) + ", ") + c.peer.user +
           (c.name.empty() ? "" : ", '" + c.name + "'") + ")";
  }

  // ---- Writing ----
  void write(Client &c, std::vector<uint8_t> bytes) {
    if (c.closing) return;
    if (uv_stream_get_write_queue_size(c.stream()) > kMaxQueuedWrite) {
      drop(c,
           "it does not read its replies (more than " + std::to_string(kMaxQueuedWrite >> 20) +
               " MiB queued)",
           false);
      return;
    }
    struct Pending {
      uv_write_t request;
      std::vector<uint8_t> bytes;
    };
    auto *p = new Pending{{}, std::move(bytes)};
    uv_buf_t buf = uv_buf_init(reinterpret_cast<char *>(p->bytes.data()),
                               static_cast<unsigned>(p->bytes.size()));
    int rc = uv_write(&p->request, c.stream(), &buf, 1,
                      [](uv_write_t *req, int) { delete reinterpret_cast<Pending *>(req); });
    if (rc != 0) {
      delete p;
      drop(c, std::string("writing to it failed: ") + uv_strerror(rc));
    }
  }
  void send_error(Client &c, uint64_t request, gf_status status, const std::string &message) {
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateError(b, request, status, b.CreateString(message))));
  }

  // ---- Connections ----
  void accept(bool remote) {
    auto *c = new Client;
    c->server = this;
    c->remote = remote;
    if (remote) {
      uv_tcp_init(&loop, &c->io.tcp);
    } else {
      uv_pipe_init(&loop, &c->io.pipe, 0);
    }
    c->handle()->data = c;
    uv_stream_t *from = remote ? reinterpret_cast<uv_stream_t *>(&tcp_listener)
                               : reinterpret_cast<uv_stream_t *>(&listener);
    if (uv_accept(from, c->stream()) != 0) {
      uv_close(c->handle(), [](uv_handle_t *h) { delete static_cast<Client *>(h->data); });
      return;
    }
    if (remote) {
      // Who it is comes from the token it shows in its Hello (greet), not from the kernel.
      size_t waiting = 0;
      for (const auto &[id, k] : clients) waiting += k->remote && !k->greeted;
      if (waiting >= kMaxRemoteUngreeted) {
        uv_close(c->handle(), [](uv_handle_t *h) { delete static_cast<Client *>(h->data); });
        if (!warned_ungreeted)
          log("remote connections refused: " + std::to_string(waiting) +
              " already wait for their Hello");
        warned_ungreeted = true;
        return;
      }
      warned_ungreeted = false;
      uv_tcp_nodelay(&c->io.tcp, 1);
      keep_alive(&c->io.tcp);
      c->address = peer_address_of(&c->io.tcp);
      c->peer.user = c->address;
    } else {
      uv_os_fd_t fd = -1;
      uv_fileno(c->handle(), &fd);
      c->peer = peer_of(fd);
      c->peer_start = jobs::start_time(c->peer.pid);
      if (c->peer.pid != static_cast<uint32_t>(::getpid())) {
        size_t open = 0;
        for (const auto &[id, k] : clients)
          open += !k->remote && k->peer.uid == c->peer.uid &&
                  k->peer.pid != static_cast<uint32_t>(::getpid());
        if (open >= kMaxConnectionsPerUser) {
          refuse_connection(c, "the service refuses the connection: user " + c->peer.user +
                                   " has " + std::to_string(open) +
                                   " open to it, the most one user may have");
          if (!warned_connections.contains(c->peer.uid))
            log("connection of " + c->peer.user + " (pid " + std::to_string(c->peer.pid) +
                ") refused: the user has " + std::to_string(open) +
                " open, the most one user may have");
          warned_connections.insert(c->peer.uid);
          return;
        }
        warned_connections.erase(c->peer.uid);
      }
    }
    c->hello_deadline = now() + kHelloTimeout_s;
    c->id = next_client++;
    clients[c->id] = c;
    uv_read_start(
        c->stream(),
        [](uv_handle_t *, size_t suggested, uv_buf_t *buf) {
          buf->base = new char[suggested];
          buf->len = suggested;
        },
        [](uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
          auto *client = static_cast<Client *>(stream->data);
          std::unique_ptr<char[]> owned(buf->base);
          client->server->on_read(*client, n, buf->base);
        });
  }

  // Says why (an Error frame, written before the connection's first read) and closes a connection
  // that is not let in. It never joins `clients`: nothing else sees it.
  static void refuse_connection(Client *c, const std::string &why) {
    struct Refusal {
      uv_write_t request;
      std::vector<uint8_t> bytes;
    };
    fb::FlatBufferBuilder b;
    auto *r = new Refusal{
        {}, wire::frame_of(b, wire::CreateError(b, 0, GF_ERR_STATE, b.CreateString(why)))};
    uv_buf_t buf = uv_buf_init(reinterpret_cast<char *>(r->bytes.data()),
                               static_cast<unsigned>(r->bytes.size()));
    auto close = [](uv_handle_t *h) {
      uv_close(h, [](uv_handle_t *closed) { delete static_cast<Client *>(closed->data); });
    };
    if (uv_write(&r->request, c->stream(), &buf, 1, [](uv_write_t *req, int) {
          auto *refusal = reinterpret_cast<Refusal *>(req);
          uv_handle_t *h = reinterpret_cast<uv_handle_t *>(req->handle);
          delete refusal;
          if (!uv_is_closing(h))
            uv_close(h, [](uv_handle_t *closed) { delete static_cast<Client *>(closed->data); });
        }) != 0) {
      delete r;
      close(c->handle());
    }
  }

  void on_read(Client &c, ssize_t n, const char *bytes) {
    if (n == 0 || c.closing) return;
    if (n < 0) {
      std::string reason;
      if (n != UV_EOF) {
        reason = std::string("reading failed: ") + uv_strerror(static_cast<int>(n));
      } else if (c.reader.buffered() > 0) {
        reason = "it closed the connection in the middle of a frame (" +
                 std::to_string(c.reader.buffered()) + " bytes of it came)";
      }
      drop(c, reason, false);
      return;
    }
    std::string problem = c.reader.feed(bytes, static_cast<size_t>(n));
    // Before it showed the token, a remote peer gets no more than a Hello's worth of memory.
    if (problem.empty() && c.remote && !c.greeted && c.reader.buffered() > kMaxRemoteHello) {
      problem = "more than " + std::to_string(kMaxRemoteHello) + " bytes before its Hello";
    }
    std::vector<uint8_t> payload;
    while (problem.empty() && !c.closing && c.reader.next(payload, problem)) {
      handle(c, *wire::message_of(payload), problem);
    }
    if (!problem.empty() && !c.closing) {
      send_error(c, 0, GF_ERR_INVALID_ARGUMENT, "closing the connection: you sent " + problem);
      drop(c, "it sent " + problem);
    }
  }

  // Ends a connection: its leases and queued requests go back to the book at once. With
  // `flush`, replies already queued (an Error saying why, a Goodbye) are sent first; a client
  // that does not read is closed at once.
  void drop(Client &c, const std::string &reason, bool flush = true) {
    if (c.closing) return;
    c.closing = true;
    uv_read_stop(c.stream());
    clients.erase(c.id);
    std::string line = who(c) + " disconnected";
    if (!reason.empty()) line += ": " + reason;
    if (c.greeted) {
      const size_t queued = book->queued_count(c.id);
      const size_t kept = c.remote ? 0 : jobs->holder_gone(c.id, holder_of(c), now());
      std::vector<LeaseId> released = book->remove_client(c.id, now());
      for (LeaseId id : released) jobs->forget(id);
      line += "; " + std::to_string(released.size()) + " lease(s) released, " +
              (kept ? std::to_string(kept) + " kept for their jobs, " : std::string()) +
              std::to_string(queued) + " request(s) dropped";
      state_dirty |= !released.empty() || kept > 0;
    }
    if (graphs) graphs->client_gone(c.id);
    if (c.blobs) {
      line += "; data plane closed, " + std::to_string(c.blobs->bytes()) + " blob byte(s) freed";
      // Closed, not freed: drop() may run inside one of the BlobHost's own callbacks (an answer
      // that finds this client's socket full), so it goes with the Client, a loop turn later.
      c.blobs->close(reason);
    }
    c.relay.reset();
    dropped.insert(&c);
    log(line);
    auto *shutdown = new uv_shutdown_t;
    if (!flush || uv_shutdown(shutdown, c.stream(), [](uv_shutdown_t *req, int) {
                    close_client(reinterpret_cast<uv_handle_t *>(req->handle));
                    delete req;
                  }) != 0) {
      delete shutdown;
      close_client(c.handle());
    }
    schedule_due = true;
  }

  static void close_client(uv_handle_t *handle) {
    if (uv_is_closing(handle)) return;
    uv_close(handle, [](uv_handle_t *h) {
      auto *c = static_cast<Client *>(h->data);
      c->server->dropped.erase(c);
      delete c;
    });
  }

  // ---- Messages ----
  void handle(Client &c, const wire::Message &m, std::string &problem) {
    if (!c.greeted) {
      const auto *hello = m.body_as_Hello();
      if (!hello) {
        problem = std::string("a ") + wire::body_name(m.body_type()) + " message before Hello";
        return;
      }
      greet(c, *hello, problem);
      return;
    }
    switch (m.body_type()) {
      case wire::Body::LeaseRequest:
        return request(c, *m.body_as_LeaseRequest());
      case wire::Body::LeaseRelease:
        return release(c, *m.body_as_LeaseRelease());
      case wire::Body::LeaseCancel:
        return cancel(c, *m.body_as_LeaseCancel());
      case wire::Body::LeaseBind:
        return bind(c, *m.body_as_LeaseBind());
      case wire::Body::StatusRequest:
        return status(c, *m.body_as_StatusRequest());
      case wire::Body::DataPlaneHello:
        return data_plane(c, *m.body_as_DataPlaneHello());
      case wire::Body::BlobPut:
        return blob_put(c, *m.body_as_BlobPut());
      case wire::Body::BlobGet:
        return blob_get(c, *m.body_as_BlobGet());
      case wire::Body::BlobDrop:
        return blob_drop(c, *m.body_as_BlobDrop());
      case wire::Body::GraphSubmit:
        return graph_submit(c, *m.body_as_GraphSubmit());
      case wire::Body::RunCancel:
        return run_cancel(c, *m.body_as_RunCancel());
      default:
        problem = std::string("a ") + wire::body_name(m.body_type()) +
                  " message, which clients do not send" +
                  (m.body_type() == wire::Body::Hello ? " twice" : "");
    }
  }

  void greet(Client &c, const wire::Hello &hello, std::string &problem) {
    if (hello.protocol() != wire::kProtocolVersion) {
      send_error(c, 0, GF_ERR_VERSION_MISMATCH,
                 "this service speaks protocol " + std::to_string(wire::kProtocolVersion) +
                     ", the client " + std::to_string(hello.protocol()));
      problem = "protocol " + std::to_string(hello.protocol());
      return;
    }
    // A name is display text the client may not even have chosen (the kernel cuts a program's
    // name mid-character): repaired and cut, never a reason to refuse (docs/service.md, Names).
    const std::string name = utf8_fitted(str(hello.name()), wire::kMaxHelloName);
    double weight = hello.weight();
    if (!(weight > 0 && weight <= 1e6)) {
      problem = "a Hello with weight " + amount_text(weight) + " (it must be in (0, 1e6])";
      return;
    }
    Peer peer = c.peer;
    if (c.remote) {
      // The token is the service user's own credential, lent: its holder gets that user's
      // rights over the pool except acting on others' leases (docs/service.md, Remote clients).
      if (!same_token(str(hello.token()), token)) {
        log("remote connection from " + c.address + " refused: wrong token");
        send_error(c, 0, GF_ERR_INVALID_ARGUMENT,
                   "wrong token: a remote client must show the token of the service's token "
                   "file (gpuflow serve --token-file)");
        drop(c, "it sent a Hello without the right token");
        return;
      }
      const std::string user = utf8_fitted(str(hello.user()), wire::kMaxHelloUser);
      peer.uid = static_cast<uint32_t>(::geteuid());
      peer.pid = hello.pid();
      peer.user = (user.empty() ? "remote" : user) + "@" + c.address;
      peer.privileged = false;
      c.peer = peer;
    } else if (hello.on_behalf_of() != 0) {
      // Only this service's own pools (graphs run inside it) lease in another client's name.
      auto behalf = clients.find(hello.on_behalf_of());
      if (c.peer.pid != static_cast<uint32_t>(::getpid()) || behalf == clients.end()) {
        problem = "a Hello on behalf of client " + std::to_string(hello.on_behalf_of()) +
                  ", which only the service's own pools may send";
        return;
      }
      peer = behalf->second->peer;
      c.peer = peer;
      c.peer_start = behalf->second->peer_start;
      weight = behalf->second->weight;  // its share is the client's
    }
    c.name = name;
    c.weight = weight;
    c.greeted = true;
    ClientInfo info;
    info.uid = peer.uid;
    info.pid = peer.pid;
    info.user = peer.user;
    info.name = name;
    info.weight = weight;
    info.since = now();
    book->add_client(c.id, info);
    log(who(c) + " connected");
    fb::FlatBufferBuilder b;
    std::vector<fb::Offset<wire::DeviceInfo>> devices;
    for (const DeviceSlot &d : book->slots()) {
      devices.push_back(wire::encode(b, d));
    }
    write(c,
          wire::frame_of(b, wire::CreateWelcome(
                                b, wire::kProtocolVersion, c.id, static_cast<uint32_t>(::getpid()),
                                b.CreateVector(devices), book->cpus(), b.CreateString(backend_name),
                                emulated_bandwidth, plane_error.empty(),
                                b.CreateVectorOfStrings(graphs->kernels()), !c.remote)));
  }

  // ---- The data plane (docs/transport.md) ----
  void data_plane(Client &c, const wire::DataPlaneHello &h) {
    const uint64_t id = h.request_id();
    // Started by the first client that asks: a service nobody asks never loads UCX.
    if (!plane && plane_error.empty()) {
      try {
        plane = std::make_unique<transport::LoopPlane>(&loop, "gpuflow-serve");
      } catch (const Error &e) {
        plane_error = e.what();
        log("no data plane: " + plane_error);
      }
    }
    if (!plane) {
      return send_error(c, id, GF_ERR_STATE, "this service has no data plane: " + plane_error);
    }
    if (c.plane_request != 0) {
      return send_error(c, id, GF_ERR_STATE, "your data plane is being opened already");
    }
    // A client asks again once its side of the data plane failed (its relay died, a send it
    // could not end): the old one goes, with its blobs, and a new one starts.
    if (c.blobs || c.relay) {
      if (c.blobs && !c.blobs->closed()) {
        log(who(c) + ": asked for a new data plane; the old one goes, " +
            std::to_string(c.blobs->bytes()) + " blob byte(s) freed");
        c.blobs->close("replaced by a new data plane at the client's request");
        if (c.closing) return;  // answering its puts found its socket full: dropped
      }
      c.relay.reset();
      c.blobs.reset();
    }
    // UCX's shared memory is reached through /proc/PID/fd and process_vm_readv: both need the
    // peer to be ptrace-able, i.e. the same user. Another user would fail deep in UCX's wire-up;
    // it is told here instead.
    if (!c.remote && c.peer.uid != ::geteuid()) {
      log(who(c) + ": data plane refused: uid " + std::to_string(c.peer.uid) +
          " is not the service's (" + std::to_string(::geteuid()) + ")");
      return send_error(c, id, GF_ERR_STATE,
                        "the data plane is only for processes of the service's own user (uid " +
                            std::to_string(::geteuid()) + "; you are uid " +
                            std::to_string(c.peer.uid) +
                            "): UCX's shared memory is owner-only (docs/transport.md, Trust)");
    }
    const auto *address = h.worker_address();
    if (!address || address->size() < 8 || address->size() > 4096) {
      return send_error(c, id, GF_ERR_INVALID_ARGUMENT,
                        "a DataPlaneHello needs a UCX worker address of 8 to 4096 bytes");
    }
    if (c.remote) return remote_data_plane(c, id, {address->begin(), address->end()});
    open_blobs(c, id, {address->begin(), address->end()}, transport::kTransports);
  }

  // A remote client's data plane goes through a gpuflow-relay child, which holds the TCP side:
  // the relay's shared-memory worker stands in for the client's.
  void remote_data_plane(Client &c, uint64_t request, std::vector<uint8_t> address) {
    const std::string program = relay_program();
    if (program.empty()) {
      return send_error(c, request, GF_ERR_SYSTEM,
                        "this service cannot serve a remote data plane: gpuflow-relay was not "
                        "found (set GPUFLOW_RELAY to its path)");
    }
    c.net_device = device_of(&c.io.tcp);
    if (c.net_device.empty()) {
      return send_error(c, request, GF_ERR_SYSTEM,
                        "no network device of this host has the address the connection from " +
                            c.address + " came to (a NAT or virtual address?)");
    }
    const ClientId client = c.id;
    const std::string input =
        transport::to_hex(plane->worker().address()) + " " + transport::to_hex(address) + "\n";
    c.plane_request = request;
    c.relay_deadline = now() + kRelayStartTimeout_s;
    try {
      c.relay = RelayProcess::start(
          &loop, program,
          {"--net-device", c.net_device, "--max-message", std::to_string(options.blob_cap),
           "--tag-space", std::to_string(c.id), "--peer", who(c)},
          input,
          [this, client, request](RelayProcess::Addresses a) {
            auto it = clients.find(client);
            if (it == clients.end()) return;
            Client &k = *it->second;
            k.plane_request = 0;
            if (a.toward_service.empty() || a.toward_client.empty()) {
              k.relay.reset();
              return send_error(k, request, GF_ERR_SYSTEM,
                                "the data-plane relay did not give its addresses");
            }
            open_blobs(k, request, a.toward_service, "tcp (relayed)", a.toward_client);
          },
          [this, client, request](const std::string &why) {
            auto it = clients.find(client);
            if (it == clients.end()) return;
            Client &k = *it->second;
            log(who(k) + ": " + why);
            k.plane_request = 0;
            k.relay.reset();  // lets a later DataPlaneHello start another
            if (k.blobs) {
              k.blobs->close(why);  // its transfers fail naming it; the connection stays
            } else {
              send_error(k, request, GF_ERR_SYSTEM, why);
            }
          });
    } catch (const Error &e) {
      c.plane_request = 0;
      log(who(c) + ": data plane refused: " + e.what());
      return send_error(c, request, GF_ERR_SYSTEM, e.what());
    }
  }

  // The client's blobs, reached at `address` (its worker, or its relay's); answers
  // DataPlaneWelcome with `welcome_address` (the service's worker, or the relay's TCP one).
  void open_blobs(Client &c, uint64_t id, const std::vector<uint8_t> &address,
                  const std::string &transports, std::vector<uint8_t> welcome_address = {}) {
    const ClientId client = c.id;
    try {
      c.blobs = std::make_unique<transport::BlobHost>(
          *plane, c.id, who(c), address, options.blob_cap, options.blob_put_timeout_s,
          [this, client](const std::string &why) {
            // Its transfers fail naming it; the control connection (and its leases) stay: a
            // client that died is dropped when its socket closes.
            auto it = clients.find(client);
            if (it == clients.end() || !it->second->blobs) return;
            log(who(*it->second) + ": " + why);
            it->second->blobs->close(why);
          });
    } catch (const Error &e) {
      log(who(c) + ": data plane refused: " + e.what());
      c.relay.reset();
      return send_error(c, id, GF_ERR_SYSTEM, e.what());
    }
    log(who(c) + " has a data plane (" + transports + ")");
    fb::FlatBufferBuilder b;
    const std::vector<uint8_t> &mine =
        welcome_address.empty() ? plane->worker().address() : welcome_address;
    write(c, wire::frame_of(
                 b, wire::CreateDataPlaneWelcome(b, id, b.CreateVector(mine), options.blob_cap,
                                                 b.CreateString(transports), true)));
    plane->progress().kick();
  }

  // A transfer's answer, later, to a client that may have gone meanwhile.
  transport::BlobHost::Reply later(Client &c, uint64_t request, std::function<void(Client &)> ok) {
    return [this, client = c.id, request, ok = std::move(ok)](const std::string &error) {
      auto it = clients.find(client);
      if (it == clients.end()) return;
      if (!error.empty()) {
        log(who(*it->second) + ": " + error);
        return send_error(*it->second, request, GF_ERR_SYSTEM, error);
      }
      ok(*it->second);
    };
  }

  bool has_plane(Client &c, uint64_t request) {
    if (c.blobs) return true;
    send_error(c, request, GF_ERR_STATE, "no data plane: send DataPlaneHello first");
    return false;
  }

  void blob_put(Client &c, const wire::BlobPut &m) {
    if (!has_plane(c, m.request_id())) return;
    const uint64_t request = m.request_id(), blob = m.blob_id(), size = m.size();
    const transport::Refusal refused =
        c.blobs->put(blob, size, m.tag(), now(), later(c, request, [=, this](Client &k) {
                       fb::FlatBufferBuilder b;
                       write(k, wire::frame_of(b, wire::CreateBlobStored(b, request, blob, size)));
                     }));
    fb::FlatBufferBuilder b;
    if (!refused) {
      if (!m.bytes_follow()) write(c, wire::frame_of(b, wire::CreateBlobPutReady(b, request)));
    } else {
      log(who(c) + ": put refused: " + refused.why);
      if (!m.bytes_follow()) return send_error(c, request, refused.status, refused.why);
      // The bytes are on their way already: received into nothing, where that is safe.
      const bool drained = c.blobs->drain(m.tag());
      write(c, wire::frame_of(b, wire::CreateBlobRefused(b, request, refused.status,
                                                         b.CreateString(refused.why), drained)));
    }
    plane->progress().kick();
  }

  void blob_get(Client &c, const wire::BlobGet &m) {
    if (!has_plane(c, m.request_id())) return;
    const uint64_t request = m.request_id();
    uint64_t size = 0;
    const transport::Refusal refused =
        c.blobs->get(m.blob_id(), m.tag(), size, later(c, request, [](Client &) {}));
    if (refused) return send_error(c, request, refused.status, refused.why);
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateBlobSending(b, request, m.blob_id(), size)));
    plane->progress().kick();
  }

  void blob_drop(Client &c, const wire::BlobDrop &m) {
    if (!has_plane(c, m.request_id())) return;
    if (!c.blobs->drop(m.blob_id())) {
      return send_error(c, m.request_id(), GF_ERR_NOT_FOUND,
                        "no blob " + std::to_string(m.blob_id()));
    }
    // A run's report goes with the outputs it lists.
    if (auto run = c.run_blobs.find(m.blob_id()); run != c.run_blobs.end()) {
      for (uint64_t id : run->second) c.blobs->drop(id);
      c.run_blobs.erase(run);
    }
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateBlobDropped(b, m.request_id(), m.blob_id())));
  }

  // ---- Graphs that run in the service (graph_runs.hpp) ----
  void graph_submit(Client &c, const wire::GraphSubmit &m) {
    const uint64_t request = m.request_id();
    if (!has_plane(c, request)) return;
    std::shared_ptr<transport::Blob> document = c.blobs->take(m.document_blob());
    if (!document) {
      return send_error(c, request, GF_ERR_NOT_FOUND,
                        "no blob " + std::to_string(m.document_blob()) +
                            " to read the graph document from (put it first)");
    }
    // A remote client's directories are paths on its own host: its commands start in the
    // service's working directory instead, and log where the service's would.
    std::string cwd = c.remote ? std::string() : str(m.working_directory());
    std::string log_dir = c.remote ? std::string() : str(m.log_directory());
    for (const std::string *dir : {&cwd, &log_dir}) {
      if (!dir->empty() && ((*dir)[0] != '/' || dir->size() > bounds::kMaxPathBytes ||
                            utf8_error_at(*dir) != std::string::npos)) {
        return send_error(c, request, GF_ERR_INVALID_ARGUMENT,
                          std::string("the ") + (dir == &cwd ? "working" : "log") +
                              " directory of a graph must be an absolute UTF-8 path of at most "
                              "GF_MAX_PATH_BYTES (" +
                              std::to_string(bounds::kMaxPathBytes) + ")");
      }
    }
    graphs->submit(c.id, c.name, request, m.run_id(), std::move(document),
                   {std::move(cwd), std::move(log_dir)}, plane->tally());
  }

  void run_cancel(Client &c, const wire::RunCancel &m) {
    if (!graphs->cancel(c.id, m.run_id())) {
      return send_error(c, m.request_id(), GF_ERR_NOT_FOUND,
                        "no run " + std::to_string(m.run_id()) + " of yours is running");
    }
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateCancelled(b, m.request_id(), m.run_id())));
  }

  // Each running graph's counts to its client, when they changed since last time.
  void send_progress() {
    std::map<std::pair<ClientId, uint64_t>, uint64_t> seen;
    graphs->progress([&](ClientId client, uint64_t run_id, const RunStats &s) {
      auto it = clients.find(client);
      if (it == clients.end() || it->second->closing) return;
      const uint64_t done = s.succeeded + s.failed + s.cancelled + s.attempts;
      seen[{client, run_id}] = done;
      auto last = progress_sent.find({client, run_id});
      if (last != progress_sent.end() && last->second == done) return;
      fb::FlatBufferBuilder b;
      write(*it->second, wire::frame_of(b, wire::CreateRunProgress(b, run_id, s.succeeded, s.failed,
                                                                   s.cancelled, s.attempts)));
    });
    progress_sent.swap(seen);  // runs that ended are forgotten
  }

  // From session threads: queued, and sent from the loop.
  void post_news(RunNews n) {
    std::lock_guard lock(news_mu);
    if (!news_open) return;
    news.push_back(std::move(n));
    uv_async_send(&news_wake);
  }

  void send_news() {
    std::deque<RunNews> batch;
    {
      std::lock_guard lock(news_mu);
      batch.swap(news);
    }
    for (RunNews &n : batch) {
      auto it = clients.find(n.client);
      if (it == clients.end() || it->second->closing) continue;  // its blobs go with `n`
      Client &c = *it->second;
      fb::FlatBufferBuilder b;
      switch (n.kind) {
        case RunNews::Kind::kAccepted:
          write(c, wire::frame_of(b, wire::CreateRunAccepted(b, n.request_id, n.run_id, n.tasks)));
          break;
        case RunNews::Kind::kRefused:
          send_error(c, n.request_id, n.status, n.why);
          break;
        case RunNews::Kind::kFinished:
          finish_run(c, n);
          break;
      }
    }
  }

  // The run's outputs and report become the client's blobs (all or none), and RunFinished
  // names the report, which lists the outputs.
  void finish_run(Client &c, RunNews &n) {
    std::vector<uint64_t> adopted;
    std::string refused;
    auto adopt = [&](uint64_t id, std::shared_ptr<transport::Blob> blob) {
      if (!refused.empty()) return;
      if (!c.blobs) {
        refused = "the data plane to this client closed before the run ended";
      } else if (transport::Refusal r = c.blobs->adopt(id, std::move(blob))) {
        refused = "the run's results could not be kept for the client: " + r.why;
      } else {
        adopted.push_back(id);
      }
    };
    for (RunNews::Output &o : n.outputs) adopt(o.blob_id, std::move(o.bytes));
    const uint64_t report_size = n.report ? n.report->size() : 0;
    if (n.report) adopt(n.report_id, std::move(n.report));
    uint64_t report = n.report_id;
    if (!refused.empty()) {
      for (uint64_t id : adopted) c.blobs->drop(id);
      n.state = GF_RUN_FAILED;
      n.why = refused;
      report = 0;
    } else if (report) {
      std::vector<uint64_t> &outputs = c.run_blobs[report];
      for (const RunNews::Output &o : n.outputs) outputs.push_back(o.blob_id);
    }
    const RunStats &s = n.stats;
    fb::FlatBufferBuilder b;
    write(c,
          wire::frame_of(b, wire::CreateRunFinished(
                                b, n.run_id, n.state, b.CreateString(n.why), s.tasks, s.succeeded,
                                s.failed, s.cancelled, s.attempts, s.transfers, s.bytes_transferred,
                                s.elapsed_s, report, report ? report_size : 0)));
  }

  // A well-formed request the service will not take is refused alone (LeaseRefused with its
  // id): the connection and its leases stay. Only malformed frames end a connection.
  void request(Client &c, const wire::LeaseRequest &r) {
    // The bounds of gpuflow.h, as the C shims check them before sending (core/request_bounds).
    std::string invalid;
    if (r.request_id() == 0) {
      invalid = "LeaseRequest.request_id is 0; a lease request needs an id of its own (1 or more)";
    } else if (r.devices()) {
      invalid = bounds::lease_devices_problem("LeaseRequest.devices", r.devices()->data(),
                                              r.devices()->size());
    }
    if (invalid.empty()) {
      invalid =
          bounds::lease_name_problem("LeaseRequest.name", r.name() ? r.name()->string_view() : "");
    }
    if (!invalid.empty()) {
      log(who(c) + ": lease request " + std::to_string(r.request_id()) + " refused: " + invalid);
      refuse(c, r.request_id(), GF_ERR_INVALID_ARGUMENT, invalid);
      return;
    }
    // Bounded queues: a client that floods the service gets refusals, not a slower service. A
    // request that fits in what is free now would not wait, so no bound keeps it out (checked
    // after submit, below).
    std::string full;
    if (book->queued_count(c.id) >= kMaxQueuedPerClient) {
      full = "client " + std::to_string(c.id) + " already has " +
             std::to_string(kMaxQueuedPerClient) +
             " lease requests waiting, the most one client may have; wait for or cancel some";
    } else if (book->queued_count_of_user(c.peer.uid) >= kMaxQueuedPerUser) {
      full = "user " + c.peer.user + " already has " + std::to_string(kMaxQueuedPerUser) +
             " lease requests waiting, the most one user's clients may have together";
    }
    LeaseAsk ask = wire::decode(r);
    std::string why = book->submit(c.id, r.request_id(), ask, now());
    if (!why.empty()) {
      log(who(c) + ": lease request refused: " + why);
      refuse(c, r.request_id(), GF_ERR_INFEASIBLE, why);
      return;
    }
    if (!full.empty() && !book->fits_now(c.id, r.request_id())) {
      book->cancel(c.id, r.request_id());
      if (!c.warned_full) log(who(c) + ": lease requests refused: " + full);
      c.warned_full = true;  // once per client: a flood would fill the log
      refuse(c, r.request_id(), GF_ERR_STATE, full);
      return;
    }
    if (r.timeout_ms() >= 0) {
      c.deadlines[r.request_id()] = now() + static_cast<double>(r.timeout_ms()) / 1000.0;
    }
    if (r.timeout_ms() == 0) {  // now or never: decided before this request is answered
      schedule();
      expire(now());
    } else {
      schedule_due = true;
    }
  }

  void refuse(Client &c, RequestId id, gf_status status, const std::string &why) {
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateLeaseRefused(b, id, status, b.CreateString(why))));
  }

  void release(Client &c, const wire::LeaseRelease &r) {
    const Lease *lease = book->lease(r.lease_id());
    ClientId holder = lease ? lease->client : 0;
    if (!book->release(c.id, r.lease_id(), c.peer.privileged, now())) {
      send_error(c, r.request_id(), GF_ERR_NOT_FOUND,
                 lease ? "lease " + std::to_string(r.lease_id()) + " is not yours"
                       : "no lease " + std::to_string(r.lease_id()));
      return;
    }
    jobs->forget(r.lease_id());
    state_dirty = true;
    log(who(c) + " released lease " + std::to_string(r.lease_id()) +
        (holder != c.id ? " of client " + std::to_string(holder) : ""));
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateReleased(b, r.request_id(), r.lease_id())));
    schedule_due = true;
  }

  void cancel(Client &c, const wire::LeaseCancel &r) {
    if (!book->cancel(c.id, r.target_request_id())) {
      send_error(c, r.request_id(), GF_ERR_NOT_FOUND,
                 "no queued request " + std::to_string(r.target_request_id()) + " of yours");
      return;
    }
    c.deadlines.erase(r.target_request_id());
    refuse(c, r.target_request_id(), GF_ERR_CANCELLED, "cancelled by the client");
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateCancelled(b, r.request_id(), r.target_request_id())));
    schedule_due = true;
  }

  void bind(Client &c, const wire::LeaseBind &m) {
    if (c.remote) {
      send_error(c, m.request_id(), GF_ERR_STATE,
                 "a process group of another host cannot be bound to a lease of this service");
      return;
    }
    std::string why = jobs->bind(c.id, c.peer.uid, m.lease_id(), m.process_group());
    if (!why.empty()) {
      send_error(c, m.request_id(), GF_ERR_INVALID_ARGUMENT, "cannot bind: " + why);
      return;
    }
    save_state();  // before the holder hears of it: from now on the job outlives a restart
    log(who(c) + " bound process group " + std::to_string(m.process_group()) + " to lease " +
        std::to_string(m.lease_id()));
    fb::FlatBufferBuilder b;
    write(c, wire::frame_of(b, wire::CreateLeaseBound(b, m.request_id(), m.lease_id())));
  }

  void status(Client &c, const wire::StatusRequest &r) {
    write(c, status_reply_frame(*book, status_context(&c), r.request_id(), clients_info()));
  }

  // What a status reply tells `asker` besides the book; null: the service itself (its dashboard),
  // which sees every name.
  StatusContext status_context(const Client *asker) const {
    StatusContext context;
    context.endpoint = endpoint;
    context.service_pid = static_cast<uint32_t>(::getpid());
    context.started_ms = started_ms;
    context.now = now();
    context.asker_uid = asker ? asker->peer.uid : 0;
    context.asker_privileged = asker ? asker->peer.privileged : true;
    context.blob_bytes = plane ? plane->tally()->bytes.load() : 0;
    for (const auto &[id, k] : clients) {
      if (k->blobs) context.data_planes[id] = {k->blobs->transports(), k->blobs->bytes()};
    }
    return context;
  }

  std::map<ClientId, std::pair<Peer, std::string>> clients_info() const {
    std::map<ClientId, std::pair<Peer, std::string>> out;
    for (const auto &[id, c] : clients) out[id] = {c->peer, c->name};
    for (const JobKeeper::KeptView &k : jobs->kept()) {
      out[k.keeper] = {Peer{k.holder.uid, k.holder.pid, k.holder.user, false},
                       "job of '" + k.holder.name + "'"};
    }
    return out;
  }

  // ---- Granting ----
  void schedule() {
    schedule_due = false;
    std::vector<Lease> granted = book->schedule(now());
    // On disk before any holder hears of its grant: a service killed from here on restarts
    // knowing the lease.
    if (!granted.empty()) save_state();
    for (const Lease &lease : granted) {
      auto it = clients.find(lease.client);
      if (it == clients.end()) continue;  // cannot happen: departed clients leave the book
      Client &c = *it->second;
      c.deadlines.erase(lease.request);
      fb::FlatBufferBuilder b;
      wire::Grant grant{lease.id, {}, lease.cpus.to_double()};
      std::string where;
      for (const DeviceShare &d : lease.devices) {
        const DeviceSlot &slot = slot_of(d.ordinal);
        grant.devices.push_back(
            {d.ordinal, slot.uuid, slot.pci_bus_id, d.share.to_double(), d.memory});
        where += (where.empty() ? "" : ", ") + std::string("gpu:") + std::to_string(d.ordinal) +
                 (d.share.to_double() < 1 ? " x" + amount_text(d.share.to_double()) : "");
      }
      if (lease.cpus.raw() > 0) {
        where += (where.empty() ? "" : ", ") + amount_text(lease.cpus.to_double()) + " cpu";
      }
      log("lease " + std::to_string(lease.id) + " granted to " + who(c) + ": " + where);
      write(c, wire::frame_of(b, wire::encode(b, lease.request, grant)));
    }
  }

  const DeviceSlot &slot_of(int32_t ordinal) const {
    for (const DeviceSlot &s : book->slots())
      if (s.ordinal == ordinal) return s;
    fail(GF_ERR_INTERNAL, "a lease names device " + std::to_string(ordinal));
  }

  // Fair share over time: a request that has waited past kRevokePatience_s while others hold
  // more than their due asks those holders to hand leases back (at their task boundaries: the
  // service never kills anything).
  void revoke_for_waiting(double t) {
    // The pass below is the fair-share order; most ticks nobody has waited that long.
    bool patience_over = false;
    for (const auto &[client, since] : book->waiting_since())
      patience_over |= t - since >= kRevokePatience_s;
    if (!patience_over) return;
    std::vector<std::pair<ClientId, double>> waiting;  // client, how long its oldest has waited
    for (const QueuedView &q : book->queued(t)) {
      if (t - q.since < kRevokePatience_s) continue;
      auto it = std::find_if(waiting.begin(), waiting.end(),
                             [&](const auto &w) { return w.first == q.client; });
      if (it == waiting.end()) waiting.emplace_back(q.client, t - q.since);
    }
    for (const auto &[client, waited] : waiting) {
      for (LeaseId id : book->revoke_for(client, t)) {
        const Lease *lease = book->lease(id);
        auto it = lease ? clients.find(lease->client) : clients.end();
        if (it == clients.end()) continue;
        const std::string reason = "fair share: client " + std::to_string(client) + " has waited " +
                                   amount_text(waited) + " s";
        log("asking " + who(*it->second) + " to hand back lease " + std::to_string(id) + " (" +
            reason + ")");
        fb::FlatBufferBuilder b;
        write(*it->second,
              wire::frame_of(b, wire::CreateLeaseRevoke(b, id, b.CreateString(reason))));
      }
    }
  }

  void expire(double t) {
    std::vector<Client *> silent;
    for (auto &[id, c] : clients)
      if (!c->greeted && c->hello_deadline <= t) silent.push_back(c);
    for (Client *c : silent) {
      drop(*c,
           std::string(c->remote ? "no Hello with the token" : "no Hello") + " within " +
               amount_text(kHelloTimeout_s) + " s",
           false);
    }
    std::vector<ClientId> stuck;
    for (auto &[id, c] : clients)
      if (c->plane_request != 0 && c->relay_deadline <= t) stuck.push_back(id);
    for (ClientId id : stuck) {
      auto it = clients.find(id);  // an earlier one's error may have dropped this one
      if (it == clients.end()) continue;
      Client &c = *it->second;
      const std::string why = "its data-plane relay gave no addresses within " +
                              amount_text(kRelayStartTimeout_s) + " s: stopped";
      log(who(c) + ": " + why);
      const uint64_t request = c.plane_request;
      c.plane_request = 0;
      c.relay.reset();
      send_error(c, request, GF_ERR_SYSTEM, why);
    }
    std::vector<std::pair<Client *, RequestId>> due;
    for (auto &[id, c] : clients) {
      for (auto &[request, deadline] : c->deadlines)
        if (deadline <= t) due.emplace_back(c, request);
    }
    for (auto &[c, request] : due) {
      c->deadlines.erase(request);
      if (!book->cancel(c->id, request)) continue;
      refuse(*c, request, GF_TIMEOUT, "no lease was free in time");
    }
  }

  // ---- Lifecycle ----
  void shut_down() {
    // The grants as they stand go to disk first and stay there: a stop is often a restart, and
    // the next service must not hand out the devices of jobs that outlive this one. With no
    // lease left there is nothing to keep, and nothing is left behind.
    if (book->leases().empty()) {
      if (saved) saved->remove();
    } else {
      save_state();
    }
    uv_close(reinterpret_cast<uv_handle_t *>(&turn_end), nullptr);
    stopping = true;
    std::vector<Client *> all;
    for (auto &[id, c] : clients) all.push_back(c);
    for (Client *c : all) {
      fb::FlatBufferBuilder b;
      write(*c,
            wire::frame_of(b, wire::CreateGoodbye(b, b.CreateString("the service is stopping"))));
      drop(*c, "the service is stopping");
    }
    uv_close(reinterpret_cast<uv_handle_t *>(&listener), nullptr);
    if (listening_tcp) uv_close(reinterpret_cast<uv_handle_t *>(&tcp_listener), nullptr);
    uv_close(reinterpret_cast<uv_handle_t *>(&wake), nullptr);
    {
      std::lock_guard lock(news_mu);
      news_open = false;
      news.clear();
    }
    uv_close(reinterpret_cast<uv_handle_t *>(&news_wake), nullptr);
    if (plane) plane->close();
    remove_socket_file(socket_path);
    // Clients get a moment to take their Goodbye; one that does not read is closed anyway.
    uv_timer_stop(&tick);
    stop_began = now();
    uv_timer_start(
        &tick, [](uv_timer_t *t) { static_cast<Impl *>(t->data)->finish_stop(); }, 0, 10);
  }

  // Waits up to half a second for clients to take their Goodbye, then closes what is left.
  void finish_stop() {
    const bool force = now() - stop_began > 0.5;
    int open = 0;
    for (Client *c : std::vector<Client *>(dropped.begin(), dropped.end())) {
      if (uv_is_closing(c->handle())) continue;
      if (force) {
        close_client(c->handle());
      } else {
        ++open;
      }
    }
    if (force || open == 0) uv_close(reinterpret_cast<uv_handle_t *>(&tick), nullptr);
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Server> Server::start(ServiceOptions options) {
  auto impl = std::make_unique<Impl>();
  Impl &s = *impl;
  s.options = std::move(options);
  s.started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  {
    std::unique_ptr<DeviceBackend> backend = make_backend(s.options.pool);
    s.backend_name = backend->name();
    s.emulated_bandwidth = s.options.pool.host.bandwidth;
    std::vector<DeviceSlot> slots;
    for (int d = 0; d < backend->device_count(); ++d) {
      DeviceDescription desc = backend->describe(d);
      DeviceSlot slot;
      slot.ordinal = d;
      slot.name = desc.name;
      slot.memory = desc.memory_bytes;
      slot.emulated = desc.emulated;
      slot.pci_bus_id = desc.pci_bus_id;
      slot.uuid = desc.uuid.empty() ? emulated_uuid(d) : desc.uuid;
      slots.push_back(slot);
    }
    backend->shutdown();
    s.book =
        std::make_unique<LeaseBook>(std::move(slots), s.options.pool.cpu_workers, s.options.policy);
  }
  s.socket_path =
      s.options.socket_path.empty() ? client::default_socket_path() : s.options.socket_path;
  s.endpoint = "unix://" + s.socket_path;
  s.jobs = std::make_unique<JobKeeper>(
      *s.book, s.options.job_kill_grace_s, [impl = &s] { return impl->next_client++; },
      [impl = &s](const std::string &line) { impl->log(line); });
  s.graphs = std::make_unique<GraphRuns>(
      GraphRuns::Options{s.endpoint, s.options.pool, s.options.plugins, s.options.blob_cap},
      [impl = &s](RunNews n) { impl->post_news(std::move(n)); });
  if (int rc = uv_loop_init(&s.loop))
    fail(GF_ERR_SYSTEM, std::string("uv_loop_init: ") + uv_strerror(rc));
  if (!s.options.listen.empty()) {
    try {
      s.token = load_token(s.options.token_file);
    } catch (...) {
      uv_loop_close(&s.loop);
      throw;
    }
  }
  try {
    listen_on(&s.loop, &s.listener, s.socket_path, s.options.group);
  } catch (...) {
    uv_loop_close(&s.loop);
    throw;
  }
  // Only once the socket is ours (listen_on refuses a live service's): the saved grants are
  // this socket's, and no other service is using them.
  try {
    std::vector<std::string> problems;
    s.saved = std::make_unique<SavedBookFile>(s.socket_path + ".leases", problems);
    const SavedBook book = s.saved->load(problems);
    for (const std::string &p : problems) s.log("saved grants not used: " + p);
    const size_t kept = restore_grants(book, *s.book, *s.jobs, s.started_ms, s.now(),
                                       [&s](const std::string &line) { s.log(line); });
    if (kept) s.log(std::to_string(kept) + " lease(s) from before a restart kept for their jobs");
  } catch (const Error &e) {
    s.log(std::string("grants are not saved (a restart will not know the leases): ") + e.what());
    s.saved.reset();
  }
  s.save_state();
  uv_check_init(&s.loop, &s.turn_end);
  s.turn_end.data = &s;
  uv_check_start(&s.turn_end, [](uv_check_t *h) {
    auto *self = static_cast<Impl *>(h->data);
    if (self->stopping) return;
    if (self->schedule_due) self->schedule();
    if (self->state_dirty) self->save_state();
  });
  s.listener.data = &s;
  if (!s.options.listen.empty()) {
    // Before the unix socket listens: while it does not, nothing can connect to it while a
    // failure here closes everything down.
    try {
      s.remote_endpoint = "tcp://" + listen_tcp(
                                         &s.loop, &s.tcp_listener, s.options.listen,
                                         [](uv_stream_t *l, int status) {
                                           if (status == 0)
                                             static_cast<Impl *>(l->data)->accept(true);
                                         },
                                         &s);
    } catch (...) {
      uv_close(reinterpret_cast<uv_handle_t *>(&s.listener), nullptr);
      uv_close(reinterpret_cast<uv_handle_t *>(&s.turn_end), nullptr);
      uv_run(&s.loop, UV_RUN_NOWAIT);
      remove_socket_file(s.socket_path);
      uv_loop_close(&s.loop);
      throw;
    }
    s.listening_tcp = true;
  }
  uv_listen(reinterpret_cast<uv_stream_t *>(&s.listener), 128, [](uv_stream_t *l, int status) {
    if (status == 0) static_cast<Impl *>(l->data)->accept(false);
  });
  uv_async_init(&s.loop, &s.wake, [](uv_async_t *a) {
    auto *self = static_cast<Impl *>(a->data);
    if (!self->stopping) self->shut_down();
  });
  s.wake.data = &s;
  uv_async_init(&s.loop, &s.news_wake,
                [](uv_async_t *a) { static_cast<Impl *>(a->data)->send_news(); });
  s.news_wake.data = &s;
  uv_timer_init(&s.loop, &s.tick);
  s.tick.data = &s;
  uv_timer_start(
      &s.tick,
      [](uv_timer_t *t) {
        auto *self = static_cast<Impl *>(t->data);
        self->expire(self->now());
        self->revoke_for_waiting(self->now());
        // By id: an expiry's answer may drop its client (and so change `clients`).
        std::vector<ClientId> with_blobs;
        for (auto &[id, c] : self->clients)
          if (c->blobs) with_blobs.push_back(id);
        for (ClientId id : with_blobs) {
          auto it = self->clients.find(id);
          if (it != self->clients.end() && it->second->blobs)
            it->second->blobs->expire(self->now());
        }
        if (self->jobs->keeping() && self->ticks % (kJobWatchMs / kTickMs) == 0 &&
            self->jobs->watch(self->now())) {
          self->state_dirty = true;
          self->schedule();
        }
        if (++self->ticks % (250 / kTickMs) == 0) {
          self->publish_snapshot();
          self->send_progress();
        }
      },
      kTickMs, kTickMs);
  s.publish_snapshot();
  s.log("serving " + std::to_string(s.book->slots().size()) + " device(s) (" + s.backend_name +
        ") and " + amount_text(s.book->cpus()) + " CPU(s) at " + s.endpoint +
        (s.remote_endpoint.empty() ? ""
                                   : " and " + s.remote_endpoint + " (remote clients, token in " +
                                         s.options.token_file + ")"));
  s.thread = std::thread([&s] {
    // libuv writes to client sockets with write(2): a client gone mid-reply would raise SIGPIPE,
    // whose default kills the whole process. Blocked on this thread, the write fails with EPIPE
    // instead and the client is dropped; the process's own disposition is left alone.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    s.plane.reset();  // its handles closed in shut_down; what UCX still holds is drained here
    uv_loop_close(&s.loop);
  });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() {
  stop();
}

void Server::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  // Sessions first: their pools hand their leases back through the loop, which still runs.
  impl_->graphs->stop();
  uv_async_send(&impl_->wake);
  impl_->thread.join();
  impl_->log("stopped");
}

const std::string &Server::endpoint() const {
  return impl_->endpoint;
}

const std::string &Server::remote_endpoint() const {
  return impl_->remote_endpoint;
}

std::shared_ptr<const Server::BookSnapshot> Server::book_snapshot() const {
  std::lock_guard lock(impl_->snapshot_mu);
  return impl_->snapshot;
}

}  // namespace gf::service
