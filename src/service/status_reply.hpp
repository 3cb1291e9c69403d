// The StatusReply a client gets: the book's devices, leases, queue and clients, with what the
// asker may not see left out (other users' lease and request names, unless it is privileged).
//
// Bounded by construction (docs/service.md, "Status"): the node's state has no size limit (a
// client may hold thousands of small leases, each named with up to 4096 bytes) but a frame does
// (wire::kMaxFrame), and a reply that does not fit would fail every `gpuflow status`, trace and
// gf_pool_service_status on the node. So names are cut, each list is capped with a count of what
// it left out, and should the reply still not fit (ended leases over very many devices), the
// history is halved first, then the other lists, until it does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "service/lease_book.hpp"
#include "service/listener.hpp"
#include "wire/framing.hpp"

namespace gf::service {

struct StatusContext {
  std::string endpoint;
  uint32_t service_pid = 0;
  int64_t started_ms = 0;  // unix time
  double now = 0;          // the book's clock
  uint32_t asker_uid = 0;
  bool asker_privileged = false;
  // Clients with a data plane: the transports UCX uses for each, and its blob bytes.
  std::map<ClientId, std::pair<std::string, uint64_t>> data_planes;
  uint64_t blob_bytes = 0;     // all clients
  std::string devices_source;  // where the list of devices came from (devices/visible_devices.hpp)
  std::string job_tracking;    // JobKeeper::tracking
};

using ClientPeers = std::map<ClientId, std::pair<Peer, std::string>>;

// What one reply lists at most.
struct StatusLimits {
  // Names (of leases, requests, clients) and user names longer than this, in bytes of UTF-8, are
  // cut at a character boundary and end in "…" (U+2026) within it.
  size_t name_bytes = 256;
  size_t leases = 1024;             // the first, by lease id
  size_t queued = 1024;             // the first, in the order the book considers them
  size_t clients = 1024;            // the first, by client id
  size_t ended = kEndedLeasesKept;  // the most recent
};

// The whole frame to send: a StatusReply within `limits` that is at most wire::kMaxFrame bytes
// (halving ended, then the other lists, when it has to), or, should even empty lists not fit
// (devices alone too many), an Error for the request saying so.
std::vector<uint8_t> status_reply_frame(const LeaseBook &book, const StatusContext &context,
                                        uint64_t request_id, const ClientPeers &peers,
                                        StatusLimits limits = {});

}  // namespace gf::service
