#include "service/status_reply.hpp"

namespace gf::service {

namespace fb = flatbuffers;

flatbuffers::Offset<wire::StatusReply> build_status_reply(fb::FlatBufferBuilder &b,
                                                          const LeaseBook &book,
                                                          const StatusContext &context,
                                                          uint64_t request_id,
                                                          const ClientPeers &peers) {
  // The book's clock counts from the service's start; status shows unix times.
  auto unix_ms = [&](double t) { return context.started_ms + static_cast<int64_t>(t * 1000); };
  auto peer = [&](ClientId id) {
    auto it = peers.find(id);
    return it == peers.end() ? Peer{} : it->second.first;
  };
  auto visible = [&](ClientId id) {
    return context.asker_privileged || peer(id).uid == context.asker_uid;
  };
  std::vector<fb::Offset<wire::DeviceStatus>> devices;
  for (const DeviceView &d : book.devices()) {
    devices.push_back(wire::CreateDeviceStatus(
        b, d.slot.ordinal, b.CreateString(d.slot.uuid), b.CreateString(d.slot.name), d.slot.memory,
        d.share_in_use.to_double(), d.memory_in_use, d.slot.emulated));
  }
  auto grants_of = [&](const Lease &l) {
    std::vector<fb::Offset<wire::DeviceGrant>> grants;
    for (const DeviceShare &s : l.devices) {
      std::string uuid, pci;
      for (const DeviceSlot &slot : book.slots()) {
        if (slot.ordinal == s.ordinal) uuid = slot.uuid, pci = slot.pci_bus_id;
      }
      grants.push_back(wire::CreateDeviceGrant(b, s.ordinal, b.CreateString(uuid),
                                               b.CreateString(pci), s.share.to_double(), s.memory));
    }
    return b.CreateVector(grants);
  };
  std::vector<fb::Offset<wire::LeaseStatus>> leases;
  for (const Lease &l : book.leases()) {
    Peer p = peer(l.client);
    leases.push_back(
        wire::CreateLeaseStatus(b, l.id, l.client, p.pid, p.uid, b.CreateString(p.user),
                                b.CreateString(visible(l.client) ? l.name : "(another user's)"),
                                unix_ms(l.since), grants_of(l), l.cpus.to_double(), l.revoking));
  }
  // Ended leases keep who held them: their holders may be gone from `peers`.
  std::vector<fb::Offset<wire::LeaseStatus>> ended;
  for (const EndedLease &e : book.ended()) {
    const Lease &l = e.lease;
    const bool shown = context.asker_privileged || e.uid == context.asker_uid;
    ended.push_back(wire::CreateLeaseStatus(b, l.id, l.client, e.pid, e.uid, b.CreateString(e.user),
                                            b.CreateString(shown ? l.name : "(another user's)"),
                                            unix_ms(l.since), grants_of(l), l.cpus.to_double(),
                                            false, unix_ms(e.until)));
  }
  std::vector<fb::Offset<wire::QueuedStatus>> queued;
  uint32_t position = 0;
  for (const QueuedView &q : book.queued(context.now)) {
    Peer p = peer(q.client);
    queued.push_back(wire::CreateQueuedStatus(
        b, q.request, q.client, ++position, p.pid, p.uid, b.CreateString(p.user),
        b.CreateString(visible(q.client) ? q.ask.name : "(another user's)"), unix_ms(q.since),
        q.ask.gpus, q.ask.gpu_memory, q.ask.cpus, q.reserved));
  }
  std::vector<fb::Offset<wire::ClientStatus>> clients;
  for (const ClientView &c : book.clients(context.now)) {
    auto plane = context.data_planes.find(c.client);
    const bool has_plane = plane != context.data_planes.end();
    clients.push_back(wire::CreateClientStatus(
        b, c.client, c.info.pid, c.info.uid, b.CreateString(c.info.user),
        b.CreateString(c.info.name), c.info.weight, unix_ms(c.info.since), c.leases, c.queued,
        c.gpus_in_use, c.dominant_share, c.usage,
        has_plane ? b.CreateString(plane->second.first) : 0, has_plane ? plane->second.second : 0));
  }
  return wire::CreateStatusReply(
      b, request_id, context.service_pid, b.CreateString(context.endpoint), context.started_ms,
      b.CreateVector(devices), b.CreateVector(leases), b.CreateVector(queued),
      b.CreateVector(clients), book.cpus(), book.cpus_in_use().to_double(), b.CreateVector(ended),
      context.blob_bytes);
}

}  // namespace gf::service
