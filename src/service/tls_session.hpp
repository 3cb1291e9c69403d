// One remote client's TLS session, driven through memory BIOs so the service's libuv loop keeps
// owning the socket: ciphertext read from it goes in, plaintext comes out for the frame reader,
// and what OpenSSL wants sent (handshake, records, alerts) is taken out and written as bytes.
#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gf::service {

class TlsSession {
 public:
  explicit TlsSession(SSL_CTX *ctx);
  ~TlsSession();
  TlsSession(const TlsSession &) = delete;
  TlsSession &operator=(const TlsSession &) = delete;

  // Ciphertext from the peer: the handshake goes on, and what plaintext it yields is appended to
  // `plain`. Returns empty, or why the session cannot go on (a failed handshake, a certificate
  // that does not verify, bytes that are no TLS); then only take_output() is still meaningful.
  std::string feed(const char *bytes, size_t size, std::string &plain);
  // Plaintext to the peer, once established (before that it is dropped: nothing is owed to a peer
  // that has not finished its handshake).
  void write(const uint8_t *bytes, size_t size);
  // The close_notify alert, once established.
  void close();
  // Ciphertext waiting to be written to the socket.
  std::vector<uint8_t> take_output();

  bool established() const { return established_; }
  // The common name of the client's certificate (verified against the client CA), or empty.
  const std::string &principal() const { return principal_; }

 private:
  SSL *ssl_ = nullptr;
  BIO *in_ = nullptr;   // owned by ssl_
  BIO *out_ = nullptr;  // owned by ssl_
  bool established_ = false;
  bool failed_ = false;
  std::string principal_;
};

}  // namespace gf::service
