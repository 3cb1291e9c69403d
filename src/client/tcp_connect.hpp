// Reaching a service on another host (docs/service.md, "Remote clients"): "tcp://HOST:PORT"
// endpoints, the token a client shows, and who it says it is.
#pragma once

#include <string>

namespace gf::client {

bool is_remote_endpoint(const std::string &endpoint);
// Connects to "tcp://HOST:PORT" (HOST a name or an IPv4 address) within `timeout_ms`; sets
// `device` to the local network device the connection goes through. Returns the socket.
// Throws gf::Error (GF_ERR_INVALID_ARGUMENT for a malformed endpoint, GF_ERR_SYSTEM naming it
// when nothing answers).
int connect_tcp(const std::string &endpoint, int timeout_ms, std::string &device);
// The first line of `token_file`, else of $GPUFLOW_TOKEN_FILE, to show the service at `endpoint`.
// Throws gf::Error naming the endpoint and the file (or saying neither was given).
std::string read_token(const std::string &endpoint, const std::string &token_file);
// This process's user name (or uid), for the service's status.
std::string user_name();

}  // namespace gf::client
