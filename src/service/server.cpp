// The service's assembly: the loop and its thread, the listeners, the handlers wired to what
// they work with, the loop's periodic work, and the stop. What a message means is decided by the
// handlers (dispatch.hpp); what a connection is, by connection.hpp.
#include "service/server.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>

#include "client/connection.hpp"
#include "core/display_text.hpp"
#include "core/error.hpp"
#include "pool/backend_choice.hpp"
#include "service/connection.hpp"
#include "service/deadlines.hpp"
#include "service/dispatch.hpp"
#include "service/graph_runs.hpp"
#include "service/job_keeper.hpp"
#include "service/listener.hpp"
#include "service/policy_change.hpp"
#include "service/remote_access.hpp"
#include "service/saved_grants.hpp"
#include "service/tcp_connection.hpp"
#include "service/unix_connection.hpp"

namespace gf::service {

namespace {

// How often the book's snapshot is published and running graphs' progress sent.
constexpr uint64_t kPublishMs = 250;

// The node's devices and CPUs, from the backend the options choose (then let go: the service
// only books them; pools that lease them open their own).
std::unique_ptr<LeaseBook> book_of(const ServiceOptions &options, std::string &backend_name) {
  std::unique_ptr<DeviceBackend> backend = make_backend(options.pool);
  backend_name = backend->name();
  std::vector<DeviceSlot> slots;
  for (int d = 0; d < backend->device_count(); ++d) {
    DeviceDescription desc = backend->describe(d);
    DeviceSlot slot;
    slot.ordinal = d;
    slot.name = desc.name;
    slot.memory = desc.memory_bytes;
    slot.emulated = desc.emulated;
    slot.pci_bus_id = desc.pci_bus_id;
    slot.uuid = desc.uuid;
    slots.push_back(slot);
  }
  backend->shutdown();
  return std::make_unique<LeaseBook>(std::move(slots), options.pool.cpu_workers, options.policy);
}

}  // namespace

struct Server::Impl {
  ServiceOptions options;
  std::string endpoint;
  std::string socket_path;
  std::string remote_endpoint;  // "tcp://HOST:PORT"
  std::string token;            // remote clients show it in their Hello
  tls::Context tls;             // null: plain TCP (insecure_listen)
  uv_loop_t loop{};
  uv_pipe_t listener{};
  uv_tcp_t tcp_listener{};
  bool listening_tcp = false;
  uv_async_t wake{};  // Server::stop and posted work, from other threads
  // Work other threads hand the loop (policy updates), run on `wake`; then the stop, if asked.
  std::mutex posted_mu;
  std::vector<std::function<void()>> posted;
  bool stop_asked = false;  // under posted_mu: nothing is posted after it
  bool adopted = false;     // the socket was handed over (listen_fd): its file is not ours
  uv_async_t news_wake{};   // graph runs' news, from their sessions' threads
  uv_timer_t tick{};
  // Work deferred to the end of each loop turn, after all I/O of the turn was read: one
  // scheduling pass for every request, release and departure that came in it, then the grants
  // on disk.
  uv_check_t turn_end{};
  std::thread thread;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  int64_t started_ms = 0;
  std::string backend_name;
  bool stopping = false;
  double stop_began = 0;
  bool stopped = false;
  uint64_t ticks = 0;

  // What the handlers work with, then the handlers (each given what it uses).
  std::unique_ptr<LeaseBook> book;
  ClientTable clients;
  Deadlines deadlines;
  std::unique_ptr<JobKeeper> jobs;
  std::unique_ptr<GrantSaver> saver;
  std::unique_ptr<ConnectionSet> connections;
  std::unique_ptr<PlaneHandler> plane;
  std::unique_ptr<LeaseHandler> leases;
  std::unique_ptr<RunHandler> runs;
  std::unique_ptr<StatusHandler> status;
  std::unique_ptr<Greeter> greeter;
  std::unique_ptr<Handlers> handlers;
  std::unique_ptr<GraphRuns> graphs;  // first to go: its sessions post news to `runs`

  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  // Every line goes out escaped: lines quote names clients chose (their own, their user's,
  // their leases'), and a control character in one must not act on whoever reads the log.
  void log(const std::string &line) const {
    const std::string shown = escaped_for_display(line);
    if (options.log) {
      options.log(shown);
    } else {
      std::fprintf(stderr, "gpuflow serve: %s\n", shown.c_str());
    }
  }
  Log logger() const {
    return [this](const std::string &line) { log(line); };
  }
  Clock clock() const {
    return [this] { return now(); };
  }

  void make_handlers();
  void post(std::function<void()> work);
  void on_wake();
  void on_tick();
  void shut_down();
  void finish_stop();
};

void Server::Impl::make_handlers() {
  connections = std::make_unique<ConnectionSet>(&loop, clients, deadlines, logger(), clock());
  plane = std::make_unique<PlaneHandler>(
      PlaneHandler::Collaborators{&loop, options.blob_cap, options.blob_put_timeout_s, clients,
                                  deadlines, logger(), clock(), options.trusted_data_devices});
  leases = std::make_unique<LeaseHandler>(
      LeaseHandler::Collaborators{*book, *jobs, *saver, clients, deadlines, logger(), clock()});
  runs = std::make_unique<RunHandler>(RunHandler::Collaborators{*graphs, *plane, clients});
  status = std::make_unique<StatusHandler>(
      StatusHandler::Collaborators{*book, *jobs, *plane, clients, clock(), endpoint, started_ms,
                                   backend_name, options.pool.host.handed_down.source});
  greeter = std::make_unique<Greeter>(
      Greeter::Collaborators{*book, clients, *plane, graphs->kernels(), backend_name,
                             options.pool.host.bandwidth, deadlines, logger(), clock()});
  handlers = std::make_unique<Handlers>(Handlers{*greeter, *leases, *plane, *runs, *status});
  connections->set_hooks(ConnectionSet::Hooks{
      [this](Connection &c, const wire::Message &m) { return dispatch(*handlers, c, m); },
      [this](Client &c, const std::string &reason) {
        std::string tail = leases->client_gone(c);
        runs->client_gone(c);
        return tail + plane->client_gone(c, reason);
      }});
}

void Server::Impl::post(std::function<void()> work) {
  {
    std::lock_guard lock(posted_mu);
    if (stop_asked) fail(GF_ERR_INVALID_HANDLE, "the service is stopping");
    posted.push_back(std::move(work));
  }
  uv_async_send(&wake);
}

// Posted work first: whoever posted it before the stop was asked waits for it.
void Server::Impl::on_wake() {
  std::vector<std::function<void()>> work;
  bool stop_now = false;
  {
    std::lock_guard lock(posted_mu);
    work.swap(posted);
    stop_now = stop_asked;
  }
  for (auto &w : work) w();
  if (stop_now && !stopping) shut_down();
}

void Server::Impl::on_tick() {
  deadlines.expire(now());
  leases->revoke_for_waiting(now());
  plane->expire_transfers(now());
  if (ticks % (kJobWatchMs / kTickMs) == 0) leases->watch_jobs(now());
  if (++ticks % (kPublishMs / kTickMs) == 0) {
    status->publish();
    runs->send_progress();
  }
}

void Server::Impl::shut_down() {
  saver->finish();
  uv_close(reinterpret_cast<uv_handle_t *>(&turn_end), nullptr);
  stopping = true;
  connections->drop_all("the service is stopping");
  uv_close(reinterpret_cast<uv_handle_t *>(&listener), nullptr);
  if (listening_tcp) uv_close(reinterpret_cast<uv_handle_t *>(&tcp_listener), nullptr);
  uv_close(reinterpret_cast<uv_handle_t *>(&wake), nullptr);
  runs->close_news();
  uv_close(reinterpret_cast<uv_handle_t *>(&news_wake), nullptr);
  plane->close();
  if (!adopted) remove_socket_file(socket_path);
  // Clients get a moment to take their Goodbye; one that does not read is closed anyway.
  uv_timer_stop(&tick);
  stop_began = now();
  uv_timer_start(
      &tick, [](uv_timer_t *t) { static_cast<Impl *>(t->data)->finish_stop(); }, 0, 10);
}

// Waits up to half a second for clients to take their Goodbye, then closes what is left.
void Server::Impl::finish_stop() {
  const bool force = now() - stop_began > 0.5;
  const size_t open = connections->close_dropped(force);
  if (force || open == 0) uv_close(reinterpret_cast<uv_handle_t *>(&tick), nullptr);
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Server> Server::start(ServiceOptions options) {
  auto impl = std::make_unique<Impl>();
  Impl &s = *impl;
  s.options = std::move(options);
  s.started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  s.book = book_of(s.options, s.backend_name);
  s.adopted = s.options.listen_fd >= 0;
  if (s.adopted) {
    s.socket_path = listening_socket_path(s.options.listen_fd);
  } else if (s.options.socket_path.empty()) {
    s.socket_path = client::default_socket_path();
  } else {
    s.socket_path = s.options.socket_path;
  }
  s.endpoint = "unix://" + s.socket_path;
  s.jobs = std::make_unique<JobKeeper>(
      *s.book, s.options.job_kill_grace_s, [&s] { return s.clients.next_id(); }, s.logger());
  {
    std::string why;
    std::optional<JobCgroups> cgroups = JobCgroups::open(s.options.cgroup_root, why);
    // A root asked for that cannot be used stops the start: the jobs would be followed less
    // closely than the site asked.
    if (!cgroups && !s.options.cgroup_root.empty()) fail(GF_ERR_INVALID_ARGUMENT, why);
    if (cgroups && cgroups->leftovers_killed() > 0) {
      s.log("killed " + std::to_string(cgroups->leftovers_killed()) +
            " process(es) a service before this one left in " + cgroups->root() + "/service");
    }
    s.jobs->use_cgroups(std::move(cgroups), why);
    s.log("jobs are followed as " + s.jobs->tracking());
  }
  s.saver = std::make_unique<GrantSaver>(
      *s.book, *s.jobs,
      [&s](ClientId id) {
        const Client *c = s.clients.find(id);
        return c ? c->holder() : HolderProcess{};
      },
      s.started_ms, s.logger());
  s.graphs = std::make_unique<GraphRuns>(
      GraphRuns::Options{s.endpoint, s.options.pool, s.options.plugins, s.options.blob_cap},
      [&s](RunNews n) { s.runs->post_news(std::move(n)); });
  if (int rc = uv_loop_init(&s.loop))
    fail(GF_ERR_SYSTEM, std::string("uv_loop_init: ") + uv_strerror(rc));
  s.make_handlers();
  if (!s.options.listen.empty()) {
    try {
      s.token = load_token(s.options.token_file);
      if (!s.options.insecure_listen && s.options.tls.certificate.empty()) {
        fail(GF_ERR_INVALID_ARGUMENT,
             "listening on " + s.options.listen +
                 " needs TLS: the service's certificate and key (gpuflow serve --tls-cert, "
                 "--tls-key; GPUFLOW_SERVE_TLS_CERT and GPUFLOW_SERVE_TLS_KEY for "
                 "gf_service_start), or plain TCP asked for by name (gpuflow serve "
                 "--insecure-listen; GPUFLOW_SERVE_INSECURE_LISTEN=1)");
      }
      if (!s.options.insecure_listen) s.tls = tls::server_context(s.options.tls);
    } catch (...) {
      uv_loop_close(&s.loop);
      throw;
    }
  }
  try {
    if (s.adopted) {
      adopt_listener(&s.loop, &s.listener, s.options.listen_fd);
    } else {
      listen_on(&s.loop, &s.listener, s.socket_path, s.options.group);
    }
  } catch (...) {
    uv_loop_close(&s.loop);
    throw;
  }
  // Only once the socket is ours (listen_on refuses a live service's): the saved grants are
  // this socket's, and no other service is using them.
  s.saver->open(s.socket_path + ".leases", s.now());
  s.saver->save();
  uv_check_init(&s.loop, &s.turn_end);
  s.turn_end.data = &s;
  uv_check_start(&s.turn_end, [](uv_check_t *h) {
    auto *self = static_cast<Impl *>(h->data);
    if (self->stopping) return;
    self->leases->schedule_if_due();
    self->saver->save_if_changed();
  });
  s.listener.data = &s;
  if (!s.options.listen.empty()) {
    // Before the unix socket listens: while it does not, nothing can connect to it while a
    // failure here closes everything down.
    try {
      s.remote_endpoint = (s.tls ? "tcp://" : "tcp+insecure://") +
                          listen_tcp(
                              &s.loop, &s.tcp_listener, s.options.listen,
                              [](uv_stream_t *l, int rc) {
                                auto *self = static_cast<Impl *>(l->data);
                                if (rc == 0)
                                  accept_tcp(*self->connections, l, self->token, self->tls.get());
                              },
                              &s);
    } catch (...) {
      uv_close(reinterpret_cast<uv_handle_t *>(&s.listener), nullptr);
      uv_close(reinterpret_cast<uv_handle_t *>(&s.turn_end), nullptr);
      uv_run(&s.loop, UV_RUN_NOWAIT);
      if (!s.adopted) remove_socket_file(s.socket_path);
      uv_loop_close(&s.loop);
      throw;
    }
    s.listening_tcp = true;
  }
  // A handed-over socket keeps the backlog its creator asked for (systemd: SOMAXCONN).
  uv_listen(reinterpret_cast<uv_stream_t *>(&s.listener), s.adopted ? SOMAXCONN : 128,
            [](uv_stream_t *l, int rc) {
              if (rc == 0) accept_unix(*static_cast<Impl *>(l->data)->connections, l);
            });
  uv_async_init(&s.loop, &s.wake, [](uv_async_t *a) { static_cast<Impl *>(a->data)->on_wake(); });
  s.wake.data = &s;
  uv_async_init(&s.loop, &s.news_wake,
                [](uv_async_t *a) { static_cast<Impl *>(a->data)->runs->send_news(); });
  s.news_wake.data = &s;
  s.runs->set_wake([&s] { uv_async_send(&s.news_wake); });
  uv_timer_init(&s.loop, &s.tick);
  s.tick.data = &s;
  uv_timer_start(
      &s.tick, [](uv_timer_t *t) { static_cast<Impl *>(t->data)->on_tick(); }, kTickMs, kTickMs);
  s.status->publish();
  s.log("serving " + std::to_string(s.book->slots().size()) + " device(s) (" + s.backend_name +
        "; " + s.options.pool.host.handed_down.source + ") and " + amount_text(s.book->cpus()) +
        " CPU(s) at " + s.endpoint +
        (s.adopted ? " (handed over as fd " + std::to_string(s.options.listen_fd) + ")" : "") +
        (s.remote_endpoint.empty()
             ? ""
             : " and " + s.remote_endpoint + " (remote clients, token in " + s.options.token_file +
                   (s.tls ? ", TLS 1.3 with the certificate " + s.options.tls.certificate +
                                (s.options.tls.client_ca.empty()
                                     ? ""
                                     : ", client certificates of " + s.options.tls.client_ca)
                          : ", WITHOUT TLS (--insecure-listen): the token and all else cross "
                            "the network in clear") +
                   ")"));
  s.thread = std::thread([&s] {
    // libuv writes to client sockets with write(2): a client gone mid-reply would raise SIGPIPE,
    // whose default kills the whole process. Blocked on this thread, the write fails with EPIPE
    // instead and the client is dropped; the process's own disposition is left alone.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    s.plane->release();  // its handles closed in shut_down; what UCX still holds is drained here
    uv_loop_close(&s.loop);
  });
  // Started: the loop accepts on its own copy of the handed-over socket.
  if (s.adopted) ::close(s.options.listen_fd);
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
  {
    std::lock_guard lock(impl_->posted_mu);
    impl_->stop_asked = true;
  }
  impl_->connections->stop_reading();
  uv_async_send(&impl_->wake);
  impl_->thread.join();
  impl_->log("stopped");
}

void Server::update_policy(Policy policy) {
  Impl &s = *impl_;
  if (std::this_thread::get_id() == s.thread.get_id()) {
    fail(GF_ERR_STATE,
         "the service's policy cannot be updated from its own thread (a log callback)");
  }
  std::promise<void> done;
  std::future<void> applied = done.get_future();
  s.post([&s, &policy, &done] {
    try {
      const Policy before = s.book->policy();
      s.book->set_policy(policy, s.now());
      s.log("policy: " + policy_change(before, s.book->policy()));
      s.leases->schedule();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  applied.get();
}

const std::string &Server::endpoint() const {
  return impl_->endpoint;
}

const std::string &Server::remote_endpoint() const {
  return impl_->remote_endpoint;
}

std::shared_ptr<const Server::BookSnapshot> Server::book_snapshot() const {
  return impl_->status->snapshot();
}

}  // namespace gf::service
