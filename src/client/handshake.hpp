// The first exchange on a connection to a service: this side's Hello, the service's Welcome (or
// its Error, then the close). Done on the bare socket before the reader thread starts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "client/byte_stream.hpp"
#include "wire/records.hpp"

namespace gf::client {

// What the service says of itself in its Welcome.
struct Welcome {
  uint64_t client_id = 0;
  uint32_t service_pid = 0;
  std::vector<wire::DeviceSlot> devices;
  double cpus = 0;
  std::string backend;
  double emulated_bandwidth = 0;
  bool data_plane = false;            // the service answers DataPlaneHello
  std::vector<std::string> kernels;   // named kernels of the service's plugins
  bool binds_process_groups = false;  // the service answers LeaseBind
  bool reclaims_leases = false;       // the service answers LeaseReclaim
};

// What this side says in its Hello.
struct Greeting {
  std::string name;           // shown in status; sent fitted to wire::kMaxHelloName
  double weight = 1;          // share among this user's clients
  uint64_t on_behalf_of = 0;  // honoured only from the service's own process
  bool remote = false;        // tcp:// endpoints: user and pid go too
  std::string token;          // remote: the shared token (empty: a client certificate vouches)
};

// Sends the Hello through `send` (the connection's writer, so a failed write reads as it does
// later) and reads the Welcome from `stream` within `timeout_ms`. What came after the Welcome stays
// in `reader`, for the connection's reader thread. Throws gf::Error: the service's
// own status when it refuses the connection, GF_ERR_VERSION_MISMATCH for another protocol,
// GF_ERR_SYSTEM naming `endpoint` when it answers nothing or something else.
Welcome shake_hands(ByteStream &stream, const std::string &endpoint, const Greeting &hello,
                    int timeout_ms,
                    const std::function<void(const std::vector<uint8_t> &frame)> &send,
                    wire::FrameReader &reader);

}  // namespace gf::client
