// How the client commands (lease, status, trace, doctor) reach the node's service.
#pragma once

#include <gpuflow.h>

#include <string>

namespace gpuflow_cli {

// The node's system service's socket (the gpuflow.socket unit's); GPUFLOW_SYSTEM_SOCKET, when
// set, stands in for it (tests, sites that put it elsewhere).
std::string system_socket_path();

// Where a client looks when neither --pool nor GPUFLOW_POOL names a service: the user's own
// service (gf_default_endpoint, where `gpuflow serve` listens by default) when a socket is there,
// else the system service when a socket is there, else the user's own, so that the error names
// where a user's service would listen. docs/service.md ("Which service a client finds") and the
// Python binding's client_endpoint() say the same.
std::string default_client_endpoint();

// The endpoint to use: `given` (--pool), else GPUFLOW_POOL, else default_client_endpoint().
std::string service_endpoint(const std::string &given);

// A pool connected to that service that runs no tasks here (no CPU workers of its own); null
// after saying why.
gf_pool *connect_to_service(const std::string &given, const std::string &token_file);

}  // namespace gpuflow_cli
