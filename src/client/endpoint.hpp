// Where a node's service listens and how a unix-socket endpoint is reached (tcp:// endpoints:
// client/tcp_connect.hpp).
#pragma once

#include <string>

namespace gf::client {

// "unix:///run/x.sock" or "/run/x.sock" -> the socket path; anything else throws
// GF_ERR_INVALID_ARGUMENT naming the text.
std::string socket_path_of(const std::string &endpoint);
// Where a service listens when told nothing: $XDG_RUNTIME_DIR/gpuflow.sock, else
// /tmp/gpuflow-$UID/gpuflow.sock.
std::string default_socket_path();
// The endpoint a pool connects to: the configured one, else GPUFLOW_POOL; "" for an embedded
// pool ("embedded" in either place means embedded).
std::string resolve_endpoint(const char *configured);
// Connects to the unix socket of `endpoint`. Returns the socket; throws GF_ERR_SYSTEM naming the
// endpoint when nothing listens there.
int connect_unix(const std::string &endpoint);

}  // namespace gf::client
