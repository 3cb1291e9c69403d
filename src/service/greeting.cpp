#include "service/greeting.hpp"

#include <unistd.h>

#include "core/utf8.hpp"
#include "wire/records.hpp"

namespace gf::service {

namespace fb = flatbuffers;

Refusal Greeter::on_hello(Connection &c, const wire::Hello &m) {
  if (m.protocol() != wire::kProtocolVersion) {
    c.send_error(0, GF_ERR_VERSION_MISMATCH,
                 "this service speaks protocol " + std::to_string(wire::kProtocolVersion) +
                     ", the client " + std::to_string(m.protocol()));
    return {GF_ERR_INVALID_ARGUMENT, "protocol " + std::to_string(m.protocol())};
  }
  // A name is display text the client may not even have chosen (the kernel cuts a program's
  // name mid-character): repaired and cut, never a reason to refuse (docs/service.md, Names).
  const std::string name = utf8_fitted(wire::str(m.name()), wire::kMaxHelloName);
  const double weight = m.weight();
  if (!(weight > 0 && weight <= 1e6)) {
    return {GF_ERR_INVALID_ARGUMENT,
            "a Hello with weight " + amount_text(weight) + " (it must be in (0, 1e6])"};
  }
  c.weight = weight;
  if (Refusal r = c.settle_identity(m, w_.clients)) return r;
  if (c.closing) return {};  // refused, and told why
  c.name = name;
  c.greeted = true;
  w_.deadlines.clear(Deadline::kHello, c.id);
  ClientInfo info;
  info.uid = c.peer.account();
  info.pid = c.peer.pid;
  info.user = c.peer.user;
  info.name = name;
  info.weight = c.weight;
  info.since = w_.now();
  w_.book.add_client(c.id, info);
  w_.log(c.who() + " connected");
  fb::FlatBufferBuilder b;
  std::vector<fb::Offset<wire::DeviceInfo>> devices;
  for (const DeviceSlot &d : w_.book.slots()) devices.push_back(wire::encode(b, d));
  c.send(wire::frame_of(
      b, wire::CreateWelcome(b, wire::kProtocolVersion, c.id, static_cast<uint32_t>(::getpid()),
                             b.CreateVector(devices), w_.book.cpus(), b.CreateString(w_.backend),
                             w_.emulated_bandwidth, w_.plane.offered(),
                             b.CreateVectorOfStrings(w_.kernels), c.peer.on_this_host(),
                             c.peer.on_this_host())));
  return {};
}

}  // namespace gf::service
