#include "service/client.hpp"

#include <cstdio>

#include "wire/framing.hpp"

namespace gf::service {

namespace fb = flatbuffers;

void Client::send_error(uint64_t request, gf_status status, const std::string &message) {
  fb::FlatBufferBuilder b;
  send(wire::frame_of(b, wire::CreateError(b, request, status, b.CreateString(message))));
}

std::string Client::who() const {
  return "client " + std::to_string(id) + " (" + peer.described() +
         (name.empty() ? "" : ", '" + name + "'") + ")";
}

std::string amount_text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

}  // namespace gf::service
