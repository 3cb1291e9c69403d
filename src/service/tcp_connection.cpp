#include "service/tcp_connection.hpp"

#include <unistd.h>

#include "core/request_bounds.hpp"
#include "core/utf8.hpp"
#include "service/remote_access.hpp"
#include "wire/records.hpp"

namespace gf::service {

namespace {

constexpr size_t kMaxRemoteHello = 16u << 10;
static_assert(bounds::kMaxTokenBytes + 4096 < kMaxRemoteHello,
              "a Hello with the longest token a client may send (GF_MAX_TOKEN_BYTES) fits");
// Remote connections that have not shown the token yet, at most (more are closed at once).
constexpr size_t kMaxRemoteUngreeted = 64;

class TcpConnection final : public Connection {
 public:
  TcpConnection(ConnectionSet &set, const std::string &token) : Connection(set), token_(token) {
    uv_tcp_init(set.loop, &tcp_);
    tcp_.data = static_cast<Connection *>(this);
  }

  bool accept_from(uv_stream_t *listener) {
    if (uv_accept(listener, stream()) != 0) {
      discard();
      return false;
    }
    peer.remote = true;
    return true;
  }

  // Who it is comes from the token it shows, not from the kernel.
  void start() {
    uv_tcp_nodelay(&tcp_, 1);
    keep_alive(&tcp_);
    peer.address = peer_address_of(&tcp_);
    peer.user = peer.address;
  }

  // The token is the service user's own credential, lent: its holder gets that user's rights
  // over the pool except acting on others' leases (docs/service.md, Remote clients).
  Refusal settle_identity(const wire::Hello &hello, const ClientTable &) override {
    if (!same_token(wire::str(hello.token()), token_)) {
      set_.log("remote connection from " + peer.address + " refused: wrong token");
      send_error(0, GF_ERR_INVALID_ARGUMENT,
                 "wrong token: a remote client must show the token of the service's token "
                 "file (gpuflow serve --token-file)");
      drop("it sent a Hello without the right token");
      return {};
    }
    const std::string user = utf8_fitted(wire::str(hello.user()), wire::kMaxHelloUser);
    peer.uid = static_cast<uint32_t>(::geteuid());
    peer.pid = hello.pid();
    peer.user = (user.empty() ? "remote" : user) + "@" + peer.address;
    peer.privileged = false;
    return {};
  }

  std::string net_device() const override { return device_of(&tcp_); }

 protected:
  uv_stream_t *stream() override { return reinterpret_cast<uv_stream_t *>(&tcp_); }
  size_t max_before_hello() const override { return kMaxRemoteHello; }

 private:
  const std::string &token_;
  uv_tcp_t tcp_{};
};

}  // namespace

void accept_tcp(ConnectionSet &set, uv_stream_t *listener, const std::string &token) {
  auto *c = new TcpConnection(set, token);
  if (!c->accept_from(listener)) return;
  size_t waiting = 0;
  for (const auto &[id, k] : set.clients.all()) waiting += k->peer.remote && !k->greeted;
  if (waiting >= kMaxRemoteUngreeted) {
    c->discard();
    if (!set.warned_ungreeted)
      set.log("remote connections refused: " + std::to_string(waiting) +
              " already wait for their Hello");
    set.warned_ungreeted = true;
    return;
  }
  set.warned_ungreeted = false;
  c->start();
  c->admit();
}

}  // namespace gf::service
