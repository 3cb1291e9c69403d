#include "client/handshake.hpp"

#include <unistd.h>

#include "client/deadlines.hpp"
#include "client/tcp_connect.hpp"
#include "core/error.hpp"
#include "core/utf8.hpp"

namespace gf::client {

namespace fb = flatbuffers;

namespace {

std::vector<uint8_t> hello_frame(const Greeting &hello) {
  fb::FlatBufferBuilder b;
  const bool remote = hello.remote;
  // Names are display text the service would cut and repair anyway: sent fitted, so what it
  // shows is what this side meant (a whole character at the end, not a replacement).
  return wire::frame_of(
      b, wire::CreateHello(
             b, wire::kProtocolVersion,
             b.CreateString(utf8_fitted(hello.name, wire::kMaxHelloName)), hello.weight,
             remote && !hello.token.empty() ? b.CreateString(hello.token) : 0, hello.on_behalf_of,
             remote ? b.CreateString(utf8_fitted(user_name(), wire::kMaxHelloUser)) : 0,
             remote ? static_cast<uint32_t>(::getpid()) : 0));
}

// The first whole frame from `stream` within `timeout_ms`.
std::vector<uint8_t> first_frame(ByteStream &stream, const std::string &endpoint, int timeout_ms,
                                 const std::string &send_failed, wire::FrameReader &reader) {
  std::vector<uint8_t> payload;
  std::string error;
  const int64_t deadline = now_ms() + timeout_ms;
  char buffer[64 << 10];
  while (!reader.next(payload, error)) {
    if (!error.empty()) fail(GF_ERR_SYSTEM, endpoint + " sent " + error);
    const int64_t left = deadline - now_ms();
    std::string why;
    const ssize_t n =
        left <= 0 ? -1 : stream.read_some(buffer, sizeof buffer, static_cast<int>(left), why);
    if (n == -1) {
      fail(GF_ERR_SYSTEM, "the gpuflow service at " + endpoint + " did not answer within " +
                              std::to_string(timeout_ms) + " ms");
    }
    if (n <= 0) {
      fail(GF_ERR_SYSTEM,
           !send_failed.empty() ? send_failed
           : why.empty()        ? "the gpuflow service at " + endpoint + " closed the connection"
                         : "the gpuflow service at " + endpoint + " closed the connection: " + why);
    }
    error = reader.feed(buffer, static_cast<size_t>(n));
    if (!error.empty()) fail(GF_ERR_SYSTEM, endpoint + " sent " + error);
  }
  return payload;
}

}  // namespace

Welcome shake_hands(ByteStream &stream, const std::string &endpoint, const Greeting &hello,
                    int timeout_ms,
                    const std::function<void(const std::vector<uint8_t> &frame)> &send,
                    wire::FrameReader &reader) {
  // A service that turns the connection away writes why and closes, perhaps before the Hello
  // is written: then the reason is still there to read below.
  std::string send_failed;
  try {
    send(hello_frame(hello));
  } catch (const Error &e) {
    send_failed = e.what();
  }
  const std::vector<uint8_t> payload =
      first_frame(stream, endpoint, timeout_ms, send_failed, reader);
  const wire::Message *m = wire::message_of(payload);
  if (const auto *e = m->body_as_Error()) {
    fail(static_cast<gf_status>(e->status()),
         "the gpuflow service at " + endpoint +
             " refused the connection: " + wire::str(e->message()));
  }
  const auto *w = m->body_as_Welcome();
  if (!w) fail(GF_ERR_SYSTEM, endpoint + " answered Hello with " + wire::body_name(m->body_type()));
  if (w->protocol() != wire::kProtocolVersion) {
    fail(GF_ERR_VERSION_MISMATCH, "the gpuflow service at " + endpoint + " speaks protocol " +
                                      std::to_string(w->protocol()) + ", this library " +
                                      std::to_string(wire::kProtocolVersion));
  }
  Welcome welcome;
  welcome.client_id = w->client_id();
  welcome.service_pid = w->service_pid();
  welcome.cpus = w->cpus();
  welcome.backend = wire::str(w->backend());
  welcome.emulated_bandwidth = w->emulated_bandwidth();
  welcome.data_plane = w->data_plane();
  welcome.binds_process_groups = w->binds_process_groups();
  welcome.reclaims_leases = w->reclaims_leases();
  if (w->kernels()) {
    for (const fb::String *k : *w->kernels()) welcome.kernels.push_back(k->str());
  }
  welcome.devices = wire::decode(w->devices());
  return welcome;
}

}  // namespace gf::client
