// One client floods the node's service with lease requests (issue 24, item 4): how long another
// client then waits to connect, lease a device and release it, and for a status reply.
//
//   service_flood --serve GPUFLOW_BIN [--flood N] [--rounds R] [--spread S] [--per-write F]
//
// Spawns `GPUFLOW_BIN serve --backend host --emulated-devices 2 --cpu-workers 2 --socket …` (its
// log goes to /dev/null). The flooding client is one unix connection speaking hand-built frames
// (wire/framing.hpp, as any program could): Hello, a lease of device 0 (granted: it holds the
// device), then N more requests for device 0 (default 20000), written F frames at a time (default
// 1000), then a marker (a release of a lease that does not exist) whose answer says the service
// has read the whole flood. A thread of its own reads every reply as it comes and counts the
// refusals, so the flooder is never cut off for not reading.
//
// The good client, meanwhile, through the public C ABI, round after round:
//   connect_lease_release: gf_pool_create (a connected pool, no CPU workers), gf_lease_acquire of
//                          device 1, gf_lease_release (gf_pool_destroy follows, not timed);
//   status:                gf_pool_service_status (JSON) on a pool connected before the flood.
// Phase "during_flood": the rounds from the flood's first byte until the marker is answered (at
// least one), back to back; phase "flood_queued": R rounds (default 50) after that, started
// evenly over S seconds (default 5), the flood still waiting: past the service's 1 s of revoke
// patience, when its fair-share pass over the waiting requests runs on every tick.
// Prints one JSON line: per phase and measurement the median, p99 and max in milliseconds, and
// how many of the flood the service queued and refused. Exit 1 on a failed call, a refusal other
// than GF_ERR_STATE (the per-client bound) or a flooding connection the service closed. No
// timings are asserted. Measure with a Release build.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gpuflow.h"
#include "wire/framing.hpp"

namespace {

namespace fb = flatbuffers;
namespace wire = gf::wire;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string &what) {
  std::fprintf(stderr, "service_flood: %s\n", what.c_str());
  std::exit(1);
}

void check(gf_status status, const char *what) {
  if (status != GF_OK)
    die(std::string(what) + " failed: " + gf_status_name(status) + ": " + gf_last_error());
}

int connect_unix(const std::string &path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, const std::vector<uint8_t> &bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die(std::string("the flooding connection: send: ") + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
}

// The next frame of `fd`, blocking; false at the end of the stream.
bool next_frame(int fd, wire::FrameReader &reader, std::vector<uint8_t> &payload) {
  std::string error;
  while (!reader.next(payload, error)) {
    if (!error.empty()) die("the flooding connection: a bad frame: " + error);
    char chunk[64 << 10];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    error = reader.feed(chunk, static_cast<size_t>(n));
    if (!error.empty()) die("the flooding connection: " + error);
  }
  return true;
}

std::vector<uint8_t> request_frame(uint64_t id, int32_t device) {
  fb::FlatBufferBuilder b;
  const std::vector<int32_t> devices = {device};
  return wire::frame_of(b, wire::CreateLeaseRequest(b, id, 1.0, 0, 0.0, b.CreateVector(devices), 0,
                                                    -1, b.CreateString("flood")));
}

gf_pool *connect_pool(const std::string &endpoint) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.endpoint = endpoint.c_str();
  config.cpu_workers = -1;
  gf_pool *pool = nullptr;
  check(gf_pool_create(&pool, &config), "gf_pool_create (connected)");
  return pool;
}

struct Stats {
  std::vector<double> ms;
  double at(double q) const {  // nearest rank of sorted `ms`
    long i = static_cast<long>(q * static_cast<double>(ms.size()) + 0.5) - 1;
    i = std::clamp(i, 0L, static_cast<long>(ms.size()) - 1);
    return ms[static_cast<size_t>(i)];
  }
  std::string json() {
    std::sort(ms.begin(), ms.end());
    char text[160];
    std::snprintf(text, sizeof text, "{\"median\": %.2f, \"p99\": %.2f, \"max\": %.2f}", at(0.5),
                  at(0.99), ms.back());
    return text;
  }
};

struct Phase {
  Stats connect_lease_release, status;
  std::string json() {
    return "{\"rounds\": " + std::to_string(status.ms.size()) +
           ", \"connect_lease_release_ms\": " + connect_lease_release.json() +
           ", \"status_ms\": " + status.json() + "}";
  }
};

void one_round(const std::string &endpoint, gf_pool *status_pool, Phase &phase) {
  const double t0 = now_s();
  gf_pool *pool = connect_pool(endpoint);
  gf_lease_request request = GF_LEASE_REQUEST_INIT;
  const int32_t device = 1;
  request.gpus = 1;
  request.devices = &device;
  request.device_count = 1;
  request.name = "service_flood good client";
  gf_lease *lease = nullptr;
  check(gf_lease_acquire(&lease, pool, &request, 60000), "gf_lease_acquire (device 1)");
  check(gf_lease_release(lease), "gf_lease_release");
  const double t1 = now_s();
  gf_pool_destroy(pool);
  gf_bytes status = {nullptr, 0};
  const double t2 = now_s();
  check(gf_pool_service_status(&status, status_pool, GF_STATUS_JSON), "gf_pool_service_status");
  const double t3 = now_s();
  gf_bytes_free(&status);
  phase.connect_lease_release.ms.push_back((t1 - t0) * 1e3);
  phase.status.ms.push_back((t3 - t2) * 1e3);
}

void usage() {
  std::fprintf(stderr,
               "usage: service_flood --serve GPUFLOW_BIN [--flood N >= 1] [--rounds R >= 1] "
               "[--spread S >= 0] [--per-write F >= 1]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char **argv) {
  const char *serve_bin = nullptr;
  long flood = 20000, rounds = 50, per_write = 1000;
  double spread_s = 5;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) usage();
    const std::string o = argv[i];
    if (o == "--serve") {
      serve_bin = argv[++i];
    } else if (o == "--flood") {
      flood = std::atol(argv[++i]);
    } else if (o == "--rounds") {
      rounds = std::atol(argv[++i]);
    } else if (o == "--spread") {
      spread_s = std::atof(argv[++i]);
    } else if (o == "--per-write") {
      per_write = std::atol(argv[++i]);
    } else {
      usage();
    }
  }
  if (!serve_bin || flood < 1 || rounds < 1 || per_write < 1 || !(spread_s >= 0)) usage();
  ::signal(SIGPIPE, SIG_IGN);

  char dir[] = "/tmp/gf-service-flood-XXXXXX";
  if (!::mkdtemp(dir)) die(std::string("mkdtemp: ") + std::strerror(errno));
  const std::string socket_path = std::string(dir) + "/gpuflow.sock";
  const std::string endpoint = "unix://" + socket_path;
  // The service first, before this process starts a thread of its own.
  const pid_t server = ::fork();
  if (server < 0) die(std::string("fork: ") + std::strerror(errno));
  if (server == 0) {
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(null_fd, STDERR_FILENO);
    }
    ::execl(serve_bin, serve_bin, "serve", "--backend", "host", "--emulated-devices", "2",
            "--cpu-workers", "2", "--socket", socket_path.c_str(), static_cast<char *>(nullptr));
    ::_exit(127);
  }
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 1000; ++tries) {  // until it listens
    fd = connect_unix(socket_path);
    if (fd < 0) ::usleep(10000);
  }
  if (fd < 0) die("the service at " + socket_path + " never listened");

  // The flooder says Hello and takes device 0.
  wire::FrameReader reader;
  std::vector<uint8_t> payload;
  {
    fb::FlatBufferBuilder b;
    send_all(fd,
             wire::frame_of(b, wire::CreateHello(b, wire::kProtocolVersion,
                                                 b.CreateString("service_flood flooder"), 1.0, 0)));
    if (!next_frame(fd, reader, payload) || !wire::message_of(payload)->body_as_Welcome())
      die("the flooder got no Welcome");
    send_all(fd, request_frame(1, 0));
    if (!next_frame(fd, reader, payload) || !wire::message_of(payload)->body_as_LeaseGranted())
      die("the flooder's lease of device 0 was not granted");
  }
  // The flood, built before the clock starts, and its marker.
  std::vector<std::vector<uint8_t>> writes;
  for (long i = 0; i < flood; ++i) {
    if (i % per_write == 0) writes.emplace_back();
    const std::vector<uint8_t> frame = request_frame(static_cast<uint64_t>(2 + i), 0);
    writes.back().insert(writes.back().end(), frame.begin(), frame.end());
  }
  const uint64_t marker = static_cast<uint64_t>(flood) + 2;
  {
    fb::FlatBufferBuilder b;
    writes.push_back(wire::frame_of(b, wire::CreateLeaseRelease(b, marker, ~uint64_t{0})));
  }

  gf_pool *status_pool = connect_pool(endpoint);
  Phase during, queued;
  one_round(endpoint, status_pool, queued);  // warm-up, not counted
  queued = Phase{};

  std::atomic<bool> answered{false};
  std::atomic<long> refused{0}, other_refusals{0};
  std::atomic<double> read_s{0};
  std::string first_other;
  const double flood_start = now_s();
  std::thread reading([&] {
    std::vector<uint8_t> got;
    while (next_frame(fd, reader, got)) {
      const wire::Message *m = wire::message_of(got);
      if (const auto *r = m->body_as_LeaseRefused()) {
        if (r->status() == GF_ERR_STATE) {
          ++refused;
        } else if (other_refusals++ == 0) {
          first_other = r->reason() ? r->reason()->str() : "";
        }
      } else if (const auto *e = m->body_as_Error(); e && e->request_id() == marker) {
        read_s = now_s() - flood_start;
        answered = true;
      }
    }
    if (!answered) die("the service closed the flooding connection before it read the flood");
  });
  std::thread writing([&] {
    for (const std::vector<uint8_t> &w : writes) send_all(fd, w);
  });
  do {
    one_round(endpoint, status_pool, during);
  } while (!answered);
  const double queued_start = now_s();
  for (long r = 0; r < rounds; ++r) {
    const double at =
        queued_start + spread_s * static_cast<double>(r) / static_cast<double>(rounds);
    if (at > now_s()) std::this_thread::sleep_for(std::chrono::duration<double>(at - now_s()));
    one_round(endpoint, status_pool, queued);
  }
  writing.join();

  std::printf(
      "{\"bench\": \"service_flood\", \"flood\": %ld, \"queued\": %ld, \"refused\": %ld, "
      "\"flood_read_ms\": %.1f, \"spread_s\": %g, \"during_flood\": %s, \"flood_queued\": %s}\n",
      flood, flood - refused.load() - other_refusals.load(), refused.load(), read_s.load() * 1e3,
      spread_s, during.json().c_str(), queued.json().c_str());
  std::fflush(stdout);

  gf_pool_destroy(status_pool);
  ::shutdown(fd, SHUT_RDWR);  // the reading thread sees the end
  reading.join();
  ::close(fd);
  ::kill(server, SIGTERM);
  int status = 0;
  ::waitpid(server, &status, 0);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);  // the socket, and grants a stopping service saved
  if (other_refusals > 0) {
    std::fprintf(stderr, "service_flood: %ld refusals other than GF_ERR_STATE, the first: %s\n",
                 other_refusals.load(), first_other.c_str());
    return 1;
  }
  return 0;
}
