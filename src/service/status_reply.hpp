// The StatusReply a client gets: the book's devices, leases, queue and clients, with what the
// asker may not see left out (other users' lease and request names, unless it is privileged).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

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
  uint64_t blob_bytes = 0;  // all clients
};

using ClientPeers = std::map<ClientId, std::pair<Peer, std::string>>;

flatbuffers::Offset<wire::StatusReply> build_status_reply(flatbuffers::FlatBufferBuilder &b,
                                                          const LeaseBook &book,
                                                          const StatusContext &context,
                                                          uint64_t request_id,
                                                          const ClientPeers &peers);

}  // namespace gf::service
