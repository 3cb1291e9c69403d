// TLS 1.3 for connections between hosts (docs/service.md, "TLS"), with OpenSSL 3 (Debian's
// libssl3): the contexts both ends build from the site's files, and what a failed handshake or
// verification says. The service drives its sessions through memory BIOs on its libuv loop
// (service/tls_session.cpp); a client over its blocking socket (client/tls_stream.cpp).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

namespace gf::tls {

using Context = std::shared_ptr<SSL_CTX>;

// The service's files: its certificate (a PEM chain, its own first) and key, and optionally the
// CA whose certificates identify remote users (mutual TLS: a client may then show one instead of
// the token).
struct ServerFiles {
  std::string certificate, key, client_ca;
};
// A client's: the CA that vouches for the service (empty: the system's trust store), and an
// optional certificate and key that say who this user is.
struct ClientFiles {
  std::string ca, certificate, key;
};

// TLS 1.3 only, no session tickets (nothing to keep between connections). Throws gf::Error
// (GF_ERR_INVALID_ARGUMENT) naming the file that could not be read or does not fit, and why.
Context server_context(const ServerFiles &files);
Context client_context(const ClientFiles &files);

// OpenSSL's queued errors as one line (and the queue emptied); `fallback` when there are none.
std::string errors(const std::string &fallback);
// Why verifying the peer's certificate failed ("certificate has expired"); empty when it did
// not (or none was asked for).
std::string verify_failure(const SSL *ssl);
// The common name of the peer's verified certificate; empty when it showed none.
std::string peer_common_name(const SSL *ssl);

}  // namespace gf::tls
