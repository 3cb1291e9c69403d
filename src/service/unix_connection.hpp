// A client on this host, over the service's unix socket: the kernel says who it is at accept
// (SO_PEERCRED), and one user may hold only so many connections.
#pragma once

#include <uv.h>

#include "service/connection.hpp"

namespace gf::service {

// Accepts one connection waiting on `listener` (a uv_pipe_t) into `set`.
void accept_unix(ConnectionSet &set, uv_stream_t *listener);

}  // namespace gf::service
