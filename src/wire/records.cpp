#include "wire/records.hpp"

namespace fb = flatbuffers;

namespace gf::wire {

fb::Offset<DeviceInfo> encode(fb::FlatBufferBuilder &b, const DeviceSlot &d) {
  return CreateDeviceInfo(b, d.ordinal, b.CreateString(d.uuid), b.CreateString(d.pci_bus_id),
                          b.CreateString(d.name), d.memory, d.emulated);
}

DeviceSlot decode(const DeviceInfo &d) {
  return {d.ordinal(), str(d.uuid()), str(d.pci_bus_id()), str(d.name()), d.memory(), d.emulated()};
}

std::vector<DeviceSlot> decode(const fb::Vector<fb::Offset<DeviceInfo>> *list) {
  std::vector<DeviceSlot> out;
  if (list) {
    for (const DeviceInfo *d : *list) out.push_back(decode(*d));
  }
  return out;
}

fb::Offset<LeaseRequest> encode(fb::FlatBufferBuilder &b, uint64_t request_id, const LeaseAsk &ask,
                                int64_t timeout_ms) {
  return CreateLeaseRequest(b, request_id, ask.gpus, ask.gpu_memory, ask.cpus,
                            ask.devices.empty() ? 0 : b.CreateVector(ask.devices), ask.priority,
                            timeout_ms, b.CreateString(ask.name));
}

LeaseAsk decode(const LeaseRequest &r) {
  LeaseAsk ask;
  ask.gpus = r.gpus();
  ask.gpu_memory = r.gpu_memory();
  ask.cpus = r.cpus();
  if (r.devices()) ask.devices.assign(r.devices()->begin(), r.devices()->end());
  ask.priority = r.priority();
  ask.name = str(r.name());
  return ask;
}

fb::Offset<DeviceGrant> encode(fb::FlatBufferBuilder &b, const LeasedDevice &d) {
  return CreateDeviceGrant(b, d.ordinal, b.CreateString(d.uuid), b.CreateString(d.pci_bus_id),
                           d.share, d.memory);
}

fb::Offset<LeaseGranted> encode(fb::FlatBufferBuilder &b, uint64_t request_id, const Grant &grant) {
  std::vector<fb::Offset<DeviceGrant>> devices;
  for (const LeasedDevice &d : grant.devices) devices.push_back(encode(b, d));
  return CreateLeaseGranted(b, request_id, grant.lease_id, b.CreateVector(devices), grant.cpus);
}

Grant decode(const LeaseGranted &g) {
  Grant grant;
  grant.lease_id = g.lease_id();
  grant.cpus = g.cpus();
  if (g.devices()) {
    for (const DeviceGrant *d : *g.devices()) {
      grant.devices.push_back(
          {d->ordinal(), str(d->uuid()), str(d->pci_bus_id()), d->share(), d->memory()});
    }
  }
  return grant;
}

Refusal refusal_of(const Message &m) {
  if (const auto *e = m.body_as_Error())
    return {static_cast<gf_status>(e->status()), str(e->message())};
  if (const auto *r = m.body_as_LeaseRefused())
    return {static_cast<gf_status>(r->status()), str(r->reason())};
  if (const auto *r = m.body_as_BlobRefused())
    return {static_cast<gf_status>(r->status()), str(r->message())};
  return {};
}

}  // namespace gf::wire
