// The records both ends of a service connection speak in: one C++ type per thing that crosses
// the wire (a device of the service, a lease ask, a grant), with the one place that turns each
// into its wire.fbs table and back. The service's book, the client and the status renderers use
// these types, so a field added to the schema is added once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/refusal.hpp"
#include "wire/framing.hpp"

namespace gf::wire {

// A message's string, empty when absent.
inline std::string str(const flatbuffers::String *s) {
  return s ? s->str() : std::string();
}

// One device of the service (DeviceInfo).
struct DeviceSlot {
  int32_t ordinal = 0;
  std::string uuid;
  std::string pci_bus_id;
  std::string name;
  uint64_t memory = 0;  // bytes
  bool emulated = false;
};

// What a client asks a lease for (LeaseRequest, less its id and timeout).
struct LeaseAsk {
  double gpus = 0;          // 0; (0, 1): a share of one device; whole N >= 1: N devices
  uint64_t gpu_memory = 0;  // bytes per device; 0: the share's part (whole devices: all)
  double cpus = 0;
  std::vector<int32_t> devices;  // only these ordinals; empty: any
  int32_t priority = 0;
  std::string name;
};

// One device of a grant (DeviceGrant).
struct LeasedDevice {
  int32_t ordinal = 0;
  std::string uuid, pci_bus_id;
  double share = 0;     // of the device: 1 for a whole one
  uint64_t memory = 0;  // bytes of it
};

// A lease as its holder hears of it (LeaseGranted, less the request id).
struct Grant {
  uint64_t lease_id = 0;
  std::vector<LeasedDevice> devices;
  double cpus = 0;
};

flatbuffers::Offset<DeviceInfo> encode(flatbuffers::FlatBufferBuilder &b, const DeviceSlot &d);
DeviceSlot decode(const DeviceInfo &d);
std::vector<DeviceSlot> decode(const flatbuffers::Vector<flatbuffers::Offset<DeviceInfo>> *list);

flatbuffers::Offset<LeaseRequest> encode(flatbuffers::FlatBufferBuilder &b, uint64_t request_id,
                                         const LeaseAsk &ask, int64_t timeout_ms);
LeaseAsk decode(const LeaseRequest &r);

flatbuffers::Offset<DeviceGrant> encode(flatbuffers::FlatBufferBuilder &b, const LeasedDevice &d);
flatbuffers::Offset<LeaseGranted> encode(flatbuffers::FlatBufferBuilder &b, uint64_t request_id,
                                         const Grant &grant);
Grant decode(const LeaseGranted &g);

// The refusal an answer carries (Error, LeaseRefused, BlobRefused) with the service's gf_status,
// so that it stays typed up to gf::Error; not refused (GF_OK) for any other body.
Refusal refusal_of(const Message &m);

}  // namespace gf::wire
