// Refuse the request, keep the client (issue 24, item 2). The bounds of gpuflow.h ("Shared
// pools": GF_MAX_LEASE_NAME_BYTES, GF_MAX_LEASE_DEVICES, …) hold at both ends:
// - the library checks them before anything is sent: through the C ABI against a stand-in
//   service that records every frame it gets, a request past a bound is refused naming the
//   field and the bound, and the stand-in never sees it; the client never writes a frame over
//   the service's limit either (client::Connection, one layer down);
// - `gpuflow serve` answers a well-formed request past a bound, sent as a hand-built frame, with
//   a refusal for that request alone: the same connection keeps the lease it holds and its next
//   request is granted. A malformed frame (one over the frame limit) still ends the connection,
//   and with it that connection's leases.
// Work is bounded by counts; the waits only bound how long a broken service can hang the test.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "gpuflow.h"
#include "processes.hpp"
#include "wire/framing.hpp"

using namespace gfsvc;

namespace {

namespace fb = flatbuffers;
namespace wire = gf::wire;

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

// Sends what it can: the peer may close mid-way (that is what some cases expect).
void send_all(int fd, const std::vector<uint8_t> &bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// Verified frames off a socket, one at a time.
class Frames {
 public:
  explicit Frames(int fd) : fd_(fd) {}
  // The next frame within timeout_ms; nullopt on timeout, end of stream or a bad frame (then
  // `ended` says which: "" for a timeout).
  std::optional<std::vector<uint8_t>> next(int timeout_ms) {
    std::vector<uint8_t> payload;
    std::string error;
    const int64_t start = now_ns();
    while (!reader_.next(payload, error)) {
      if (!error.empty()) {
        ended = "a bad frame: " + error;
        return std::nullopt;
      }
      const int left = timeout_ms - static_cast<int>(ms_since(start));
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, left) <= 0) return std::nullopt;
      char chunk[64 << 10];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ended = "closed";
        return std::nullopt;
      }
      error = reader_.feed(chunk, static_cast<size_t>(n));
    }
    return payload;
  }
  std::string ended;

 private:
  int fd_;
  wire::FrameReader reader_;
};

std::vector<uint8_t> hello_frame(const std::string &name) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(b,
                        wire::CreateHello(b, wire::kProtocolVersion, b.CreateString(name), 1.0, 0));
}

// A LeaseRequest as any client could build it: the name as raw bytes, the list as given.
std::vector<uint8_t> lease_request_frame(uint64_t id, double gpus,
                                         const std::vector<int32_t> &devices,
                                         const std::string &name) {
  fb::FlatBufferBuilder b(devices.size() * 4 + name.size() + 1024);
  const auto list = devices.empty() ? 0 : b.CreateVector(devices);
  const auto text = b.CreateString(name);
  return wire::frame_of(b, wire::CreateLeaseRequest(b, id, gpus, 0, 0.0, list, 0, -1, text));
}

std::vector<uint8_t> release_frame(uint64_t id, uint64_t lease) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(b, wire::CreateLeaseRelease(b, id, lease));
}

std::vector<int32_t> ordinals(size_t count) {
  std::vector<int32_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(i);
  return out;
}

// ---- A stand-in service: says Welcome, records every frame after Hello, grants nothing ----

struct Seen {
  std::string body;  // "LeaseRequest", …
  uint64_t request_id = 0;
  std::string name;  // a LeaseRequest's
  size_t devices = 0;
};

class StandIn {
 public:
  explicit StandIn(std::string path) : path_(std::move(path)) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path_.c_str());
    if (::bind(listener_, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::listen(listener_, 4) != 0) {
      ADD_FAILURE() << "stand-in service at " << path_ << ": " << std::strerror(errno);
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~StandIn() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
    ::unlink(path_.c_str());
  }
  std::string endpoint() const { return "unix://" + path_; }
  // Every frame after the Hellos, of every connection, in the order they came.
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  int hellos() {
    std::lock_guard lock(mu_);
    return hellos_;
  }

 private:
  // One connection at a time, until the test ends.
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      talk(fd);
      ::close(fd);
    }
  }
  void talk(int fd) {
    Frames frames(fd);
    bool greeted = false;
    while (!stop_) {
      std::optional<std::vector<uint8_t>> payload = frames.next(20);
      if (!payload) {
        if (frames.ended.empty()) continue;  // nothing yet
        return;
      }
      const wire::Message *m = wire::message_of(*payload);
      if (!greeted) {
        greeted = m->body_as_Hello() != nullptr;
        {
          std::lock_guard lock(mu_);
          hellos_ += greeted;
        }
        send_all(fd, welcome_frame());
        continue;
      }
      Seen s;
      s.body = wire::body_name(m->body_type());
      const auto *r = m->body_as_LeaseRequest();
      if (r) {
        s.request_id = r->request_id();
        s.name = r->name() ? r->name()->str() : "";
        s.devices = r->devices() ? r->devices()->size() : 0;
      }
      {
        // Recorded before the answer goes: a client that has its answer finds it in seen().
        std::lock_guard lock(mu_);
        seen_.push_back(s);
      }
      if (r) {
        fb::FlatBufferBuilder b;
        send_all(fd, wire::frame_of(b, wire::CreateLeaseRefused(
                                           b, r->request_id(), GF_ERR_INFEASIBLE,
                                           b.CreateString("the stand-in service grants nothing"))));
      }
    }
  }
  static std::vector<uint8_t> welcome_frame() {
    fb::FlatBufferBuilder b;
    std::vector<fb::Offset<wire::DeviceInfo>> devices;
    for (int d = 0; d < 2; ++d) {
      devices.push_back(wire::CreateDeviceInfo(
          b, d, b.CreateString("GPU-stand-in-" + std::to_string(d)), b.CreateString(""),
          b.CreateString("stand-in"), uint64_t{256} << 20, true));
    }
    return wire::frame_of(
        b,
        wire::CreateWelcome(b, wire::kProtocolVersion, 1, static_cast<uint32_t>(::getpid()),
                            b.CreateVector(devices), 4.0, b.CreateString("host"), 1e10, false, 0));
  }

  std::string path_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Seen> seen_;
  int hellos_ = 0;
  std::thread thread_;
};

class BoundsTest : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
  TempDir dir;
};

std::string describe(const std::vector<Seen> &seen) {
  std::string out;
  for (const Seen &s : seen) {
    out += s.body + " " + std::to_string(s.request_id) + " name " + std::to_string(s.name.size()) +
           " bytes, " + std::to_string(s.devices) + " devices\n";
  }
  return out;
}

// Through the C ABI: each request past a bound fails with GF_ERR_INVALID_ARGUMENT naming the
// field and the bound, and not one byte of it reaches the service; the request after them does.
TEST_F(BoundsTest, TheCAbiSendsNothingPastTheBounds) {
  StandIn service(dir / "stand-in.sock");
  const std::string endpoint = service.endpoint();
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_HOST;
  config.cpu_workers = 1;
  config.endpoint = endpoint.c_str();
  gf_pool *pool = nullptr;
  ASSERT_EQ(gf_pool_create(&pool, &config), GF_OK) << gf_last_error();

  const std::string long_name(GF_MAX_LEASE_NAME_BYTES + 1, 'n');
  const std::string not_utf8 = "train\xff";
  const std::vector<int32_t> too_many = ordinals(GF_MAX_LEASE_DEVICES + 1);
  const std::vector<int32_t> twice = {0, 1, 0};
  struct Case {
    const char *what;
    const std::string *name;
    const std::vector<int32_t> *devices;
    std::string said;
  };
  const std::vector<Case> cases = {
      {"an oversized name", &long_name, nullptr,
       "gf_lease_request.name is 4097 bytes; at most GF_MAX_LEASE_NAME_BYTES (4096)"},
      {"a name that is not UTF-8", &not_utf8, nullptr,
       "gf_lease_request.name is not valid UTF-8 (byte 5 is 0xff)"},
      {"an oversized device list", nullptr, &too_many,
       "gf_lease_request.devices lists 1025 devices; at most GF_MAX_LEASE_DEVICES (1024)"},
      {"a device listed twice", nullptr, &twice,
       "gf_lease_request.devices lists device 0 twice (entries 0 and 2); each ordinal at most "
       "once"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    gf_lease_request r = GF_LEASE_REQUEST_INIT;
    r.gpus = 1;
    r.name = c.name ? c.name->c_str() : nullptr;
    r.devices = c.devices ? c.devices->data() : nullptr;
    r.device_count = c.devices ? static_cast<uint32_t>(c.devices->size()) : 0;
    gf_lease *lease = nullptr;
    EXPECT_EQ(gf_lease_acquire(&lease, pool, &r, -1), GF_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(gf_last_error()), c.said);
    EXPECT_EQ(lease, nullptr);
  }
  // A request within the bounds goes out and is answered (refused: the stand-in grants nothing).
  gf_lease_request good = GF_LEASE_REQUEST_INIT;
  good.gpus = 1;
  good.name = "good";
  const std::vector<int32_t> both = {1, 0};
  good.devices = both.data();
  good.device_count = 2;
  gf_lease *lease = nullptr;
  EXPECT_EQ(gf_lease_acquire(&lease, pool, &good, -1), GF_ERR_INFEASIBLE);
  EXPECT_NE(std::string(gf_last_error()).find("grants nothing"), std::string::npos)
      << gf_last_error();
  gf_pool_destroy(pool);

  // The stream is ordered: had any refused request been sent, it would come before this one.
  const std::vector<Seen> seen = service.seen();
  EXPECT_EQ(service.hellos(), 1);
  ASSERT_EQ(seen.size(), 1u) << describe(seen);
  EXPECT_EQ(seen[0].body, "LeaseRequest");
  EXPECT_EQ(seen[0].name, "good");
  EXPECT_EQ(seen[0].devices, 2u);
}

// One layer down: a request whose frame would be over the service's frame limit fails alone
// (GF_ERR_INVALID_ARGUMENT, nothing sent) and the connection goes on.
TEST_F(BoundsTest, TheClientNeverWritesAFrameOverTheLimit) {
  StandIn service(dir / "stand-in.sock");
  auto connection = gf::client::Connection::open(service.endpoint(), "bounds_test", 1);
  gf::client::LeaseAsk huge;
  huge.gpus = 1;
  huge.name.assign(wire::kMaxFrame, 'n');  // the other fields make the frame larger still
  try {
    connection->leases().acquire(huge, -1);
    ADD_FAILURE() << "a LeaseRequest over the frame limit was sent";
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(contains(e.what(), "more than the service at " + service.endpoint() +
                                       " takes in one frame (4194304); nothing was sent"))
        << e.what();
  }
  EXPECT_TRUE(connection->alive());
  // The same through the asynchronous path a connected pool's lease agent takes.
  std::mutex mu;
  std::optional<std::pair<gf_status, std::string>> answer;
  connection->leases().acquire_async(
      huge, [&](const gf::client::Grant *, gf_status status, const std::string &why) {
        std::lock_guard lock(mu);
        answer.emplace(status, why);
      });
  {
    std::lock_guard lock(mu);
    ASSERT_TRUE(answer) << "an oversized asynchronous request must fail at once";
    EXPECT_EQ(answer->first, GF_ERR_INVALID_ARGUMENT) << answer->second;
  }
  EXPECT_TRUE(connection->alive());
  gf::client::LeaseAsk fine;
  fine.gpus = 1;
  fine.name = "fine";
  try {
    connection->leases().acquire(fine, -1);
    ADD_FAILURE() << "the stand-in granted a lease";
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_INFEASIBLE) << e.what();
  }
  connection.reset();
  const std::vector<Seen> seen = service.seen();
  ASSERT_EQ(seen.size(), 1u) << describe(seen);
  EXPECT_EQ(seen[0].name, "fine");
}

// `gpuflow serve` and hand-built frames: every well-formed request past a bound is refused for
// itself alone. The connection keeps the lease it held, its next request is granted, and status
// shows both leases; then a frame over the limit ends the connection and its leases with it.
TEST_F(BoundsTest, TheServiceRefusesTheRequestAndKeepsTheClient) {
  Service service(dir, 2);
  ASSERT_TRUE(service.ready()) << service.log();
  const int fd = connect_unix(service.socket());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  Frames frames(fd);
  const int wait_ms = 10000 * kTimeFactor;
  std::vector<uint8_t> payload;  // the last message's
  auto next = [&]() -> const wire::Message * {
    std::optional<std::vector<uint8_t>> got = frames.next(wait_ms);
    if (!got) return nullptr;
    payload = std::move(*got);
    return wire::message_of(payload);
  };
  send_all(fd, hello_frame("bounds test"));
  const wire::Message *m = next();
  ASSERT_TRUE(m && m->body_as_Welcome()) << frames.ended << "\n" << service.log();

  send_all(fd, lease_request_frame(1, 1, {0}, "held"));
  m = next();
  ASSERT_TRUE(m && m->body_as_LeaseGranted()) << frames.ended << "\n" << service.log();
  const uint64_t held = m->body_as_LeaseGranted()->lease_id();

  struct Case {
    const char *what;
    uint64_t id;
    std::vector<int32_t> devices;
    std::string name;
    std::string said;
  };
  // A million ordinals: about 4 MB, a frame still within the 4 MiB limit.
  const std::vector<Case> cases = {
      {"a name one byte over",
       2,
       {},
       std::string(GF_MAX_LEASE_NAME_BYTES + 1, 'n'),
       "LeaseRequest.name is 4097 bytes; at most GF_MAX_LEASE_NAME_BYTES (4096)"},
      {"a name that is not UTF-8", 3, {}, "caf\xe9", "LeaseRequest.name is not valid UTF-8"},
      {"one device more than the bound", 4, ordinals(GF_MAX_LEASE_DEVICES + 1), "",
       "LeaseRequest.devices lists 1025 devices; at most GF_MAX_LEASE_DEVICES (1024)"},
      {"a million devices", 5, ordinals(1000000), "", "LeaseRequest.devices lists 1000000 devices"},
      {"a device twice", 6, {1, 1}, "", "LeaseRequest.devices lists device 1 twice"},
      {"request id 0", 0, {1}, "zero", "LeaseRequest.request_id is 0"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<uint8_t> frame = lease_request_frame(c.id, 1, c.devices, c.name);
    ASSERT_LE(frame.size(), 4 + size_t{wire::kMaxFrame});
    send_all(fd, frame);
    m = next();
    ASSERT_TRUE(m) << frames.ended << "\n" << service.log();
    const wire::LeaseRefused *refused = m->body_as_LeaseRefused();
    ASSERT_TRUE(refused) << wire::body_name(m->body_type());
    EXPECT_EQ(refused->request_id(), c.id);
    EXPECT_EQ(refused->status(), GF_ERR_INVALID_ARGUMENT);
    const std::string reason = refused->reason() ? refused->reason()->str() : "";
    EXPECT_TRUE(contains(reason, c.said)) << reason;
  }

  // The same connection: its next request is granted, and both leases are the service's view.
  send_all(fd, lease_request_frame(7, 1, {1}, "later"));
  m = next();
  ASSERT_TRUE(m && m->body_as_LeaseGranted()) << frames.ended << "\n" << service.log();
  EXPECT_EQ(m->body_as_LeaseGranted()->request_id(), 7u);
  const uint64_t later = m->body_as_LeaseGranted()->lease_id();
  const std::vector<std::string> status_args = {"status", "--json", "--pool", service.endpoint()};
  auto [rc, status] = run_cli(dir, status_args);
  EXPECT_EQ(rc, 0) << status;
  EXPECT_TRUE(contains(status, "\"lease_id\":" + std::to_string(held) + ",")) << status;
  EXPECT_TRUE(contains(status, "\"lease_id\":" + std::to_string(later) + ",")) << status;
  const std::string log = service.log();
  EXPECT_FALSE(contains(log, "'bounds test') disconnected")) << log;
  EXPECT_TRUE(contains(log, "lease request 2 refused: LeaseRequest.name is 4097 bytes")) << log;
  send_all(fd, release_frame(8, held));
  m = next();
  ASSERT_TRUE(m && m->body_as_Released()) << frames.ended << "\n" << service.log();
  EXPECT_EQ(m->body_as_Released()->lease_id(), held);

  // A frame over the limit is malformed: the service says why and closes the connection, and
  // the lease it still held goes back.
  const std::vector<uint8_t> oversized =
      lease_request_frame(9, 1, ordinals(wire::kMaxFrame / 4 + 1), "");
  ASSERT_GT(oversized.size(), 4 + size_t{wire::kMaxFrame});
  send_all(fd, oversized);
  std::string said;
  while ((m = next())) {
    if (const auto *e = m->body_as_Error()) said = e->message() ? e->message()->str() : "";
  }
  EXPECT_EQ(frames.ended, "closed") << service.log();
  EXPECT_TRUE(contains(said, "closing the connection: you sent a frame of")) << said;
  const int64_t start = now_ns();
  std::string after;
  while (ms_since(start) < wait_ms) {
    after = service.log();
    if (contains(after, "'bounds test') disconnected")) break;
    ::usleep(10000);
  }
  EXPECT_TRUE(contains(after, "'bounds test') disconnected: it sent a frame of")) << after;
  EXPECT_TRUE(contains(after, "bytes (at most 4194304); 1 lease(s) released")) << after;
  auto [rc_after, status_after] = run_cli(dir, status_args);
  EXPECT_EQ(rc_after, 0) << status_after;
  EXPECT_TRUE(contains(status_after, "\"leases\":[]")) << status_after;
}

}  // namespace
