#include "service/unix_connection.hpp"

#include <unistd.h>

#include <cstdint>

#include "service/job_processes.hpp"
#include "service/listener.hpp"

namespace gf::service {

namespace {

// The unix-socket connections one user may hold open (docs/service.md, "Faults"); the service's
// own pools, for graphs it runs, are not counted.
constexpr size_t kMaxConnectionsPerUser = 256;

uint32_t own_pid() {
  return static_cast<uint32_t>(::getpid());
}

class UnixConnection final : public Connection {
 public:
  explicit UnixConnection(ConnectionSet &set) : Connection(set) {
    uv_pipe_init(set.loop, &pipe_, 0);
    pipe_.data = static_cast<Connection *>(this);
  }

  bool accept_from(uv_stream_t *listener) {
    if (uv_accept(listener, stream()) != 0) {
      discard();
      return false;
    }
    uv_os_fd_t fd = -1;
    uv_fileno(handle(), &fd);
    peer = peer_of(fd);
    peer.start = jobs::start_time(peer.pid);
    return true;
  }

  // Only this service's own pools (graphs run inside it) lease in another client's name, and
  // take its identity and its share.
  Refusal settle_identity(const wire::Hello &hello, const ClientTable &clients) override {
    if (hello.on_behalf_of() == 0) return {};
    const Client *behalf = clients.find(hello.on_behalf_of());
    if (peer.pid != own_pid() || !behalf) {
      return {GF_ERR_INVALID_ARGUMENT, "a Hello on behalf of client " +
                                           std::to_string(hello.on_behalf_of()) +
                                           ", which only the service's own pools may send"};
    }
    // The credentials only: the connection itself stays one on this host.
    peer.uid = behalf->peer.uid;
    peer.pid = behalf->peer.pid;
    peer.user = behalf->peer.user;
    peer.privileged = behalf->peer.privileged;
    peer.start = behalf->peer.start;
    weight = behalf->weight;
    return {};
  }

 protected:
  uv_stream_t *stream() override { return reinterpret_cast<uv_stream_t *>(&pipe_); }
  size_t max_before_hello() const override { return SIZE_MAX; }

 private:
  uv_pipe_t pipe_{};
};

}  // namespace

void accept_unix(ConnectionSet &set, uv_stream_t *listener) {
  auto *c = new UnixConnection(set);
  if (!c->accept_from(listener)) return;
  if (c->peer.pid != own_pid()) {
    size_t open = 0;
    for (const auto &[id, k] : set.clients.all())
      open += k->peer.on_this_host() && k->peer.uid == c->peer.uid && k->peer.pid != own_pid();
    if (open >= kMaxConnectionsPerUser) {
      c->refuse_and_close("the service refuses the connection: user " + c->peer.user + " has " +
                          std::to_string(open) + " open to it, the most one user may have");
      if (!set.warned_users.contains(c->peer.uid))
        set.log("connection of " + c->peer.user + " (pid " + std::to_string(c->peer.pid) +
                ") refused: the user has " + std::to_string(open) +
                " open, the most one user may have");
      set.warned_users.insert(c->peer.uid);
      return;
    }
    set.warned_users.erase(c->peer.uid);
  }
  c->admit();
}

}  // namespace gf::service
