#include "service/tcp_connection.hpp"

#include <unistd.h>

#include <memory>

#include "core/request_bounds.hpp"
#include "core/utf8.hpp"
#include "service/remote_access.hpp"
#include "service/tls_session.hpp"
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
  TcpConnection(ConnectionSet &set, const std::string &token, SSL_CTX *tls)
      : Connection(set), token_(token) {
    uv_tcp_init(set.loop, &tcp_);
    tcp_.data = static_cast<Connection *>(this);
    if (tls) tls_ = std::make_unique<TlsSession>(tls);
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
    peer.tls = tls_ != nullptr;
  }

  // The token is the service user's own credential, lent: its holder gets that user's rights
  // over the pool except acting on others' leases (docs/service.md, Remote clients).
  // A certificate the client CA vouches for says who it is instead, and is charged as that
  // principal by fair share.
  Refusal settle_identity(const wire::Hello &hello, const ClientTable &) override {
    const std::string principal = tls_ ? tls_->principal() : std::string();
    if (principal.empty() && !same_token(wire::str(hello.token()), token_)) {
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
    peer.principal = utf8_fitted(principal, wire::kMaxHelloUser);
    peer.user = (!principal.empty() ? peer.principal
                 : user.empty()     ? "remote"
                                    : user) +
                "@" + peer.address;
    peer.privileged = false;
    return {};
  }

  std::string net_device() const override { return device_of(&tcp_); }

 protected:
  uv_stream_t *stream() override { return reinterpret_cast<uv_stream_t *>(&tcp_); }
  size_t max_before_hello() const override { return kMaxRemoteHello; }

  void on_bytes(ssize_t n, const char *bytes) override {
    if (!tls_ || n <= 0 || closing) return on_read(n, bytes);
    // A TLS connection begins with a handshake record (type 22): anything else is a client
    // speaking plain TCP, told so in its own language before it is closed.
    if (!tls_->established() && !seen_bytes_ && bytes[0] != 22) {
      write_raw(error_frame(
          "this service speaks TLS 1.3 on this port: connect with a tcp:// endpoint (the "
          "service's CA in GPUFLOW_TLS_CA), not tcp+insecure://"));
      drop("it does not speak TLS");
      return;
    }
    seen_bytes_ = true;
    std::string plain;
    const std::string why = tls_->feed(bytes, static_cast<size_t>(n), plain);
    write_raw(tls_->take_output());  // the handshake's answer, or the alert saying why it failed
    if (!why.empty()) {
      drop(why);
      return;
    }
    if (!plain.empty()) on_read(static_cast<ssize_t>(plain.size()), plain.data());
  }

  void transmit(std::vector<uint8_t> bytes) override {
    if (!tls_) return write_raw(std::move(bytes));
    tls_->write(bytes.data(), bytes.size());
    write_raw(tls_->take_output());
  }

  void finish() override {
    if (!tls_) return;
    tls_->close();
    write_raw(tls_->take_output());
  }

 private:
  static std::vector<uint8_t> error_frame(const std::string &why) {
    flatbuffers::FlatBufferBuilder b;
    return wire::frame_of(b, wire::CreateError(b, 0, GF_ERR_STATE, b.CreateString(why)));
  }

  const std::string &token_;
  uv_tcp_t tcp_{};
  std::unique_ptr<TlsSession> tls_;
  bool seen_bytes_ = false;
};

}  // namespace

void accept_tcp(ConnectionSet &set, uv_stream_t *listener, const std::string &token, SSL_CTX *tls) {
  auto *c = new TcpConnection(set, token, tls);
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
