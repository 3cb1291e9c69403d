// A remote client, over TCP (docs/service.md, "Remote clients"): no kernel vouches for it, so it
// is let in on the service's token, shown in its Hello; until then it may hold only a Hello's
// worth of the service's memory, and only so many such connections may wait. With a TLS context
// the connection is TLS 1.3 (service/tls_session.hpp) and a client certificate the context
// verified may stand in for the token; without one it is plain TCP (--insecure-listen).
#pragma once

#include <openssl/ssl.h>
#include <uv.h>

#include <string>

#include "service/connection.hpp"

namespace gf::service {

// Accepts one connection waiting on `listener` (a uv_tcp_t) into `set`; its Hello must show
// `token` (which outlives the set) unless its certificate says who it is. `tls` (outliving the
// set too): TLS 1.3 with that context; null: plain TCP.
void accept_tcp(ConnectionSet &set, uv_stream_t *listener, const std::string &token, SSL_CTX *tls);

}  // namespace gf::service
