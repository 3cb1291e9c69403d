// How the client commands (lease, status, trace, doctor) reach the node's service.
#pragma once

#include <gpuflow.h>

#include <string>

namespace gpuflow_cli {

// The endpoint to use: `given` (--pool), else GPUFLOW_POOL, else the library's default.
std::string service_endpoint(const std::string &given);

// A pool connected to that service that runs no tasks here (no CPU workers of its own); null
// after saying why.
gf_pool *connect_to_service(const std::string &given, const std::string &token_file);

}  // namespace gpuflow_cli
