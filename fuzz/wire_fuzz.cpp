// Fuzzes the service's control messages (wire/wire.fbs). Each input goes twice:
// - through gf::wire::FrameReader, fed in pieces as a socket would deliver them: every frame it
//   hands out must have passed the Verifier and check_message, so reading its body is safe;
// - as the bytes of one client connection to a real service started once in this process
//   (gf_service_start on emulated devices, in a private temporary directory): the input is
//   written, the writing side shut, and the service must close the connection within 10 s (a
//   client that ends leaves nothing behind). Every 16 inputs a fresh client says Hello and must
//   get Welcome: garbage on other connections never stops the service answering.
// Seeds: fuzz/wire_seeds (a Hello, Hello + requests, a truncated frame, an oversized length).
#include <gpuflow.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "wire/framing.hpp"

namespace {

std::string socket_path;

void quiet(const char *, void *) {}

void start_service() {
  char dir[] = "/tmp/gf-wire-fuzz-XXXXXX";
  if (!mkdtemp(dir)) std::abort();
  socket_path = std::string(dir) + "/gf.sock";
  gf_pool_config pool = GF_POOL_CONFIG_INIT;
  pool.backend = GF_BACKEND_HOST;
  pool.emulated_devices = 2;
  pool.emulated_device_memory = 64u << 20;
  pool.cpu_workers = 2;
  gf_service_config config = GF_SERVICE_CONFIG_INIT;
  config.pool = &pool;
  config.socket_path = socket_path.c_str();
  config.log = quiet;
  gf_service *service = nullptr;  // runs until the process ends
  if (gf_service_start(&service, &config) != GF_OK) {
    std::fprintf(stderr, "wire_fuzz: cannot start the service: %s\n", gf_last_error());
    std::abort();
  }
}

int connect_service() {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path.c_str());
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
    std::fprintf(stderr, "wire_fuzz: the service does not accept connections any more\n");
    std::abort();
  }
  return fd;
}

void send_all(int fd, const uint8_t *data, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the service closed it: fine
    sent += static_cast<size_t>(n);
  }
}

// Reads until the service closes the connection; aborts if it has not within 10 s. With
// `want_welcome`, the bytes read must start with a Welcome frame.
void read_to_close(int fd, bool want_welcome) {
  gf::wire::FrameReader reader;
  bool welcomed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "wire_fuzz: the service kept a finished connection open\n");
      std::abort();
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char chunk[4096];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    if (want_welcome && !welcomed) {
      if (!reader.feed(chunk, static_cast<size_t>(n)).empty()) std::abort();
      std::vector<uint8_t> payload;
      std::string error;
      if (reader.next(payload, error)) {
        if (!gf::wire::message_of(payload)->body_as_Welcome()) std::abort();
        welcomed = true;
        return;  // the caller closes
      }
      if (!error.empty()) std::abort();
    }
  }
  if (want_welcome && !welcomed) {
    std::fprintf(stderr, "wire_fuzz: the service did not answer Hello with Welcome\n");
    std::abort();
  }
}

void check_service_answers() {
  flatbuffers::FlatBufferBuilder b;
  std::vector<uint8_t> hello = gf::wire::frame_of(
      b, gf::wire::CreateHello(b, gf::wire::kProtocolVersion, b.CreateString("fuzz"), 1.0, 0));
  int fd = connect_service();
  send_all(fd, hello.data(), hello.size());
  read_to_close(fd, true);
  ::close(fd);
}

// Every frame FrameReader hands out is verified: reading its body must be safe.
void through_frame_reader(const uint8_t *data, size_t size) {
  gf::wire::FrameReader reader;
  // Pieces of 1 to 64 bytes, the lengths drawn from the input itself.
  size_t at = 0;
  size_t step = size ? (data[0] % 64) + 1 : 1;
  while (at < size) {
    const size_t n = std::min(step, size - at);
    std::string problem = reader.feed(reinterpret_cast<const char *>(data + at), n);
    at += n;
    std::vector<uint8_t> payload;
    while (problem.empty() && reader.next(payload, problem)) {
      const gf::wire::Message *m = gf::wire::message_of(payload);
      if (!gf::wire::body_name(m->body_type()) || !m->body()) std::abort();
    }
    if (!problem.empty()) return;
    step = (step * 7 + 3) % 64 + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  start_service();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned inputs = 0;
  through_frame_reader(data, size);
  int fd = connect_service();
  send_all(fd, data, size);
  ::shutdown(fd, SHUT_WR);
  read_to_close(fd, false);
  ::close(fd);
  if (++inputs % 16 == 0) check_service_answers();
  return 0;
}
