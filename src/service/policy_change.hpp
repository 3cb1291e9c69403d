// What a policy update changed, as the service logs it (gf_service_update_policy, SIGHUP of
// `gpuflow serve`): an operator reading the log sees the effect of their edit, field by field.
#pragma once

#include <string>

#include "service/lease_book.hpp"

namespace gf::service {

// "user_gpu_cap 0 -> 2; weight of alice 1 -> 3", or "unchanged". Users are named as the
// system's user database names them (their uid when it has no name); a user not listed in a
// policy weighs 1 in it.
std::string policy_change(const Policy &before, const Policy &after);

}  // namespace gf::service
