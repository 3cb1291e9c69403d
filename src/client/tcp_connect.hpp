// Reaching a service on another host (docs/service.md, "Remote clients"): "tcp://HOST:PORT"
// endpoints (TLS, client/tls_stream.hpp) and "tcp+insecure://HOST:PORT" ones (plain TCP, for a
// service that asked for it with --insecure-listen), the token a client shows, and who it says
// it is.
#pragma once

#include <string>

namespace gf::client {

bool is_remote_endpoint(const std::string &endpoint);
// A remote endpoint spoken to without TLS.
bool is_insecure_endpoint(const std::string &endpoint);
// The HOST of a remote endpoint (what its certificate must name).
std::string host_of(const std::string &endpoint);
// Connects to "tcp://HOST:PORT" (HOST a name or an IPv4 address) within `timeout_ms`; sets
// `device` to the local network device the connection goes through. Returns the socket.
// Throws gf::Error (GF_ERR_INVALID_ARGUMENT for a malformed endpoint, GF_ERR_SYSTEM naming it
// when nothing answers).
int connect_tcp(const std::string &endpoint, int timeout_ms, std::string &device);
// The first line of `token_file`, else of $GPUFLOW_TOKEN_FILE, to show the service at `endpoint`.
// Throws gf::Error naming the endpoint and the file (or saying neither was given), except that
// with `optional` (a client certificate says who this is) no file given reads as no token.
std::string read_token(const std::string &endpoint, const std::string &token_file,
                       bool optional = false);
// This process's user name (or uid), for the service's status.
std::string user_name();

}  // namespace gf::client
