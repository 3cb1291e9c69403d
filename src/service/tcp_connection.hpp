// A remote client, over TCP (docs/service.md, "Remote clients"): no kernel vouches for it, so it
// is let in on the service's token, shown in its Hello; until then it may hold only a Hello's
// worth of the service's memory, and only so many such connections may wait.
#pragma once

#include <uv.h>

#include <string>

#include "service/connection.hpp"

namespace gf::service {

// Accepts one connection waiting on `listener` (a uv_tcp_t) into `set`; its Hello must show
// `token` (which outlives the set).
void accept_tcp(ConnectionSet &set, uv_stream_t *listener, const std::string &token);

}  // namespace gf::service
