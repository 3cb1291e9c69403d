#include "service/status_reply.hpp"

#include <algorithm>

#include "core/utf8.hpp"
#include "gpuflow.h"

namespace gf::service {

namespace fb = flatbuffers;

namespace {

// The book's lists, read once: a reply that has to be built again with fewer entries shows the
// same moment.
struct BookViews {
  std::vector<DeviceView> devices;
  std::vector<Lease> leases;
  std::vector<EndedLease> ended;
  std::vector<QueuedView> queued;
  std::vector<ClientView> clients;
};

uint32_t left_out(size_t total, size_t shown) {
  return static_cast<uint32_t>(std::min<size_t>(total - shown, UINT32_MAX));
}

fb::Offset<wire::StatusReply> build(fb::FlatBufferBuilder &b, const LeaseBook &book,
                                    const BookViews &views, const StatusContext &context,
                                    uint64_t request_id, const ClientPeers &peers,
                                    const StatusLimits &limits) {
  // The book's clock counts from the service's start; status shows unix times.
  auto unix_ms = [&](double t) { return context.started_ms + static_cast<int64_t>(t * 1000); };
  auto peer = [&](ClientId id) {
    auto it = peers.find(id);
    return it == peers.end() ? Peer{} : it->second.first;
  };
  auto visible = [&](ClientId id) {
    return context.asker_privileged || peer(id).uid == context.asker_uid;
  };
  // Names and users as they are shown: UTF-8 (a user name from the password database need not
  // be), cut to the limit. Users, uuids and bus ids repeat from entry to entry: stored once.
  auto name = [&](const std::string &s) {
    return b.CreateString(utf8_abbreviated(utf8_repaired(s), limits.name_bytes));
  };
  auto shared = [&](const std::string &s) {
    return b.CreateSharedString(utf8_abbreviated(utf8_repaired(s), limits.name_bytes));
  };
  std::vector<fb::Offset<wire::DeviceStatus>> devices;
  for (const DeviceView &d : views.devices) {
    devices.push_back(wire::CreateDeviceStatus(
        b, d.slot.ordinal, b.CreateSharedString(d.slot.uuid), b.CreateSharedString(d.slot.name),
        d.slot.memory, d.share_in_use.to_double(), d.memory_in_use, d.slot.emulated));
  }
  auto grants_of = [&](const Lease &l) {
    std::vector<fb::Offset<wire::DeviceGrant>> grants;
    for (const DeviceShare &s : l.devices) {
      std::string uuid, pci;
      for (const DeviceSlot &slot : book.slots()) {
        if (slot.ordinal == s.ordinal) uuid = slot.uuid, pci = slot.pci_bus_id;
      }
      grants.push_back(wire::CreateDeviceGrant(b, s.ordinal, b.CreateSharedString(uuid),
                                               b.CreateSharedString(pci), s.share.to_double(),
                                               s.memory));
    }
    return b.CreateVector(grants);
  };
  const size_t lease_count = std::min(views.leases.size(), limits.leases);
  std::vector<fb::Offset<wire::LeaseStatus>> leases;
  for (size_t i = 0; i < lease_count; ++i) {
    const Lease &l = views.leases[i];
    Peer p = peer(l.client);
    leases.push_back(
        wire::CreateLeaseStatus(b, l.id, l.client, p.pid, p.uid, shared(p.user),
                                visible(l.client) ? name(l.name) : shared("(another user's)"),
                                unix_ms(l.since), grants_of(l), l.cpus.to_double(), l.revoking));
  }
  // Ended leases keep who held them: their holders may be gone from `peers`. The most recent
  // ones are listed (a trace reading status every 250 ms needs only those).
  const size_t ended_count = std::min(views.ended.size(), limits.ended);
  std::vector<fb::Offset<wire::LeaseStatus>> ended;
  for (size_t i = views.ended.size() - ended_count; i < views.ended.size(); ++i) {
    const EndedLease &e = views.ended[i];
    const Lease &l = e.lease;
    const bool shown = context.asker_privileged || e.uid == context.asker_uid;
    ended.push_back(wire::CreateLeaseStatus(b, l.id, l.client, e.pid, e.uid, shared(e.user),
                                            shown ? name(l.name) : shared("(another user's)"),
                                            unix_ms(l.since), grants_of(l), l.cpus.to_double(),
                                            false, unix_ms(e.until)));
  }
  const size_t queued_count = std::min(views.queued.size(), limits.queued);
  std::vector<fb::Offset<wire::QueuedStatus>> queued;
  for (size_t i = 0; i < queued_count; ++i) {
    const QueuedView &q = views.queued[i];
    Peer p = peer(q.client);
    queued.push_back(wire::CreateQueuedStatus(
        b, q.request, q.client, static_cast<uint32_t>(i + 1), p.pid, p.uid, shared(p.user),
        visible(q.client) ? name(q.ask.name) : shared("(another user's)"), unix_ms(q.since),
        q.ask.gpus, q.ask.gpu_memory, q.ask.cpus, q.reserved));
  }
  const size_t client_count = std::min(views.clients.size(), limits.clients);
  std::vector<fb::Offset<wire::ClientStatus>> clients;
  for (size_t i = 0; i < client_count; ++i) {
    const ClientView &c = views.clients[i];
    auto plane = context.data_planes.find(c.client);
    const bool has_plane = plane != context.data_planes.end();
    clients.push_back(wire::CreateClientStatus(
        b, c.client, c.info.pid, c.info.uid, shared(c.info.user), name(c.info.name), c.info.weight,
        unix_ms(c.info.since), c.leases, c.queued, c.gpus_in_use, c.dominant_share, c.usage,
        has_plane ? b.CreateSharedString(plane->second.first) : 0,
        has_plane ? plane->second.second : 0));
  }
  return wire::CreateStatusReply(
      b, request_id, context.service_pid, b.CreateString(context.endpoint), context.started_ms,
      b.CreateVector(devices), b.CreateVector(leases), b.CreateVector(queued),
      b.CreateVector(clients), book.cpus(), book.cpus_in_use().to_double(), b.CreateVector(ended),
      context.blob_bytes, left_out(views.leases.size(), lease_count),
      left_out(views.queued.size(), queued_count), left_out(views.clients.size(), client_count),
      left_out(views.ended.size(), ended_count), b.CreateString(context.devices_source),
      b.CreateString(context.job_tracking));
}

}  // namespace

std::vector<uint8_t> status_reply_frame(const LeaseBook &book, const StatusContext &context,
                                        uint64_t request_id, const ClientPeers &peers,
                                        StatusLimits limits) {
  const BookViews views{book.devices(), book.leases(), book.ended(), book.queued(context.now),
                        book.clients(context.now)};
  for (;;) {
    fb::FlatBufferBuilder b;
    std::vector<uint8_t> frame =
        wire::frame_of(b, build(b, book, views, context, request_id, peers, limits));
    if (frame.size() <= 4 + size_t{wire::kMaxFrame}) return frame;
    // History goes first: it only feeds timelines, which have seen most of it already.
    if (limits.ended > 0) {
      limits.ended /= 2;
    } else if (limits.leases + limits.queued + limits.clients > 0) {
      limits.leases /= 2, limits.queued /= 2, limits.clients /= 2;
    } else {
      fb::FlatBufferBuilder e;
      return wire::frame_of(
          e, wire::CreateError(e, request_id, GF_ERR_SYSTEM,
                               e.CreateString("the service's status does not fit in a reply "
                                              "even without leases, queue and clients (" +
                                              std::to_string(views.devices.size()) + " devices)")));
    }
  }
}

}  // namespace gf::service
