// From a message's body type to the handler that answers it: one table (dispatch.cpp), each
// handler named on_<message>.
#pragma once

#include "core/refusal.hpp"
#include "service/connection.hpp"
#include "service/greeting.hpp"
#include "service/lease_handler.hpp"
#include "service/plane_handler.hpp"
#include "service/run_handler.hpp"
#include "service/status_handler.hpp"

namespace gf::service {

struct Handlers {
  Greeter &greeter;
  LeaseHandler &leases;
  PlaneHandler &plane;
  RunHandler &runs;
  StatusHandler &status;
};

// Hands `m` of `c` to its handler. A refusal is a protocol violation (a message before Hello,
// one clients do not send, a Hello that cannot be taken): the connection is closed for it.
Refusal dispatch(Handlers &handlers, Connection &c, const wire::Message &m);

}  // namespace gf::service
