// Where a message's request id is, read from the schema rather than listed by hand: every body
// table of wire.fbs with a `request_id: uint64` field carries one (requests and their answers
// alike), found through flatc's mini-reflection of wire.fbs (--reflect-names). A body added to
// the schema is routed by the id it declares without a C++ edit; tests/unit/request_ids_test.cpp
// checks the routing against the schema file itself.
#pragma once

#include <cstdint>

#include "wire/wire_generated.h"

namespace gf::wire {

// Whether bodies of this type have a `request_id: uint64` field.
bool has_request_id(Body body);

// The request id `message`'s body carries, or 0 for a body without one (a notice the service
// sends unasked: LeaseRevoke, RunFinished, Goodbye, …). `message` must be verified.
uint64_t request_id_of(const Message &message);

}  // namespace gf::wire
