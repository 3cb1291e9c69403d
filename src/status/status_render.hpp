// A service's StatusReply as people and programs read it: the table `gpuflow status` prints
// (devices as nvidia-smi lists them, leases and the queue as squeue does, then clients), and
// one JSON object with the same content. The JSON is the one rendering of the lease book: status
// --json and gf_pool_service_status(GF_STATUS_JSON) print it, and the service's dashboard serves
// its members in /snapshot.json and draws its page from them (docs/service.md, "Status").
#pragma once

#include <string>

#include "wire/framing.hpp"

namespace gf::status {

std::string text(const wire::StatusReply &reply);
std::string json(const wire::StatusReply &reply);
// json()'s members without the braces around them, for a document that adds members of its own
// ahead of them (the dashboard's snapshot).
std::string json_members(const wire::StatusReply &reply);

}  // namespace gf::status
