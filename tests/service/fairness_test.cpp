// Per-client fairness on the service's own time (issue 24, item 4), against `gpuflow serve`:
// - a client that floods the service with 20,000 lease requests for a device another client
//   holds gets 1024 of them queued and the rest refused (GF_ERR_STATE, the bound named), while
//   other processes connect, lease the other device, release it and read status meanwhile;
// - several connections of one user share one bound of 4096 waiting requests;
// - a unix connection that never says Hello is dropped at the Hello deadline (10 s);
// - one user holds at most 256 unix connections: the next is closed at accept, and once some
//   close, a new one is taken again.
// The flooders and the silent connections are hand-built frames on raw sockets (wire/framing.hpp),
// the good clients are the gpuflow command and service_client. Work is bounded by counts; the
// waits only bound how long a broken service can hang the test.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpuflow.h"
#include "processes.hpp"
#include "wire/framing.hpp"

using namespace gfsvc;
using nlohmann::json;

namespace {

namespace fb = flatbuffers;
namespace wire = gf::wire;

// The service's bounds (src/service/server.cpp), as its messages and log state them.
constexpr size_t kPerClient = 1024;
constexpr size_t kPerUser = 4096;
constexpr size_t kConnectionsPerUser = 256;

const int kWaitMs = 10000 * kTimeFactor;  // for one answer

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

int count_of(const std::string &text, const std::string &part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Waits until the service's log holds `part` at least `times` times (true), or gives up.
bool wait_for_log(const Service &service, const std::string &part, int times = 1) {
  const int64_t start = now_ns();
  while (ms_since(start) < kWaitMs) {
    if (count_of(service.log(), part) >= times) return true;
    ::usleep(10000);
  }
  return false;
}

std::vector<uint8_t> hello_frame(const std::string &name) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(b,
                        wire::CreateHello(b, wire::kProtocolVersion, b.CreateString(name), 1.0, 0));
}

// One whole device, only `device`, waiting as long as it takes.
std::vector<uint8_t> request_frame(uint64_t id, int32_t device) {
  fb::FlatBufferBuilder b;
  const std::vector<int32_t> devices = {device};
  return wire::frame_of(b, wire::CreateLeaseRequest(b, id, 1.0, 0, 0.0, b.CreateVector(devices), 0,
                                                    -1, b.CreateString("flood")));
}

std::vector<uint8_t> cancel_frame(uint64_t id, uint64_t target) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(b, wire::CreateLeaseCancel(b, id, target));
}

// A release of a lease that does not exist: the service answers it with an Error carrying its
// id. It handles a connection's frames in order and refuses a request as it reads it, so once
// this answer came, every refusal of the requests sent before it has come too.
std::vector<uint8_t> marker_frame(uint64_t id) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(b, wire::CreateLeaseRelease(b, id, ~uint64_t{0}));
}

// A unix-socket connection speaking hand-built frames.
class Raw {
 public:
  explicit Raw(const std::string &path) : fd_(connect_unix(path)) {}
  ~Raw() { close(); }
  Raw(const Raw &) = delete;
  Raw &operator=(const Raw &) = delete;

  bool connected() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Blocks until all is written, or returns false when the peer closed.
  bool send(const std::vector<uint8_t> &bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // The next verified frame within timeout_ms; nullopt on timeout, end of stream or a bad frame
  // (then `ended` says which; it stays empty for a timeout).
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
        ended = n == 0 ? "closed" : std::string("closed: ") + std::strerror(errno);
        return std::nullopt;
      }
      error = reader_.feed(chunk, static_cast<size_t>(n));
    }
    return payload;
  }
  // Says Hello; the client id of the Welcome that answers it, or 0 (then `ended` says why).
  uint64_t hello(const std::string &name) {
    if (!send(hello_frame(name))) {
      ended = "closed before its Hello was sent";
      return 0;
    }
    std::optional<std::vector<uint8_t>> got = next(kWaitMs);
    if (!got) return 0;
    const wire::Welcome *welcome = wire::message_of(*got)->body_as_Welcome();
    if (!welcome)
      ended = "answered by " + std::string(wire::body_name(wire::message_of(*got)->body_type()));
    return welcome ? welcome->client_id() : 0;
  }
  // True once the service has closed the connection (end of stream or a reset) within
  // timeout_ms, reading and discarding what comes before.
  bool closed_by_peer(int timeout_ms) {
    const int64_t start = now_ns();
    while (ms_since(start) < timeout_ms) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return true;
    }
    return false;
  }

  std::string ended;

 private:
  int fd_ = -1;
  wire::FrameReader reader_;
};

// Every answer up to the marker's, sorted by kind.
struct Replies {
  struct Refusal {
    uint64_t request_id;
    int32_t status;
    std::string reason;
  };
  std::vector<Refusal> refused;
  std::vector<uint64_t> granted;    // request ids
  std::vector<uint64_t> cancelled;  // target request ids
  std::vector<std::string> other;   // bodies of anything else
  bool marker = false;              // its answer came
};

Replies drain(Raw &raw, uint64_t marker_id) {
  Replies out;
  if (!raw.send(marker_frame(marker_id))) return out;
  while (std::optional<std::vector<uint8_t>> got = raw.next(kWaitMs)) {
    const wire::Message *m = wire::message_of(*got);
    if (const auto *r = m->body_as_LeaseRefused()) {
      out.refused.push_back({r->request_id(), r->status(), r->reason() ? r->reason()->str() : ""});
    } else if (const auto *g = m->body_as_LeaseGranted()) {
      out.granted.push_back(g->request_id());
    } else if (const auto *c = m->body_as_Cancelled()) {
      out.cancelled.push_back(c->target_request_id());
    } else if (const auto *e = m->body_as_Error(); e && e->request_id() == marker_id) {
      out.marker = true;
      return out;
    } else {
      out.other.push_back(wire::body_name(m->body_type()));
    }
  }
  return out;
}

// `count` requests for `device` with ids first, first + 1, …, in writes of `per_write` frames.
void flood(Raw &raw, uint64_t first, size_t count, int32_t device, size_t per_write = 1000) {
  std::vector<uint8_t> batch;
  for (size_t i = 0; i < count; ++i) {
    const std::vector<uint8_t> frame = request_frame(first + i, device);
    batch.insert(batch.end(), frame.begin(), frame.end());
    if ((i + 1) % per_write == 0 || i + 1 == count) {
      ASSERT_TRUE(raw.send(batch)) << "the service closed the flooding connection";
      batch.clear();
    }
  }
}

// The refusals of requests `first`, `first + 1`, … (`count` of them), each GF_ERR_STATE with a
// reason holding `said`.
void expect_refused(const Replies &replies, uint64_t first, size_t count, const std::string &said) {
  ASSERT_EQ(replies.refused.size(), count);
  for (size_t i = 0; i < count; ++i) {
    const Replies::Refusal &r = replies.refused[i];
    ASSERT_EQ(r.request_id, first + i);
    ASSERT_EQ(r.status, GF_ERR_STATE) << r.reason;
    ASSERT_TRUE(contains(r.reason, said)) << r.reason;
  }
}

json status(const TempDir &dir, const Service &service) {
  auto [rc, out] = run_cli(dir, {"status", "--json", "--pool", service.endpoint()});
  EXPECT_EQ(rc, 0) << out;
  return rc == 0 ? json::parse(out.substr(0, out.find('\n')), nullptr, false) : json();
}

// The requests one client has waiting, as status counts them (-1: no such client).
int64_t queued_of(const json &s, uint64_t client) {
  if (!s.is_object()) return -1;
  for (const json &c : s["clients"])
    if (c["client_id"] == client) return c["queued"].get<int64_t>();
  return -1;
}

std::vector<std::string> lease_args(const Service &service, int device) {
  return {GPUFLOW_CLI_PATH,       "lease", "--pool", service.endpoint(), "--gpus", "1", "--device",
          std::to_string(device), "--",    "true"};
}

class FairnessTest : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
  TempDir dir;
};

// ---- a (i): one flooding client beside good ones ----

// The flooder reads nothing until its 20,000 requests are all sent: its refusals (about 3 MB)
// stay under the 16 MiB of unread replies at which the service cuts a client off, so it is
// refused, not cut off, and keeps its connection and its queue.
TEST_F(FairnessTest, AFloodingClientGetsItsBoundAndOthersAreServedMeanwhile) {
  Service service(dir, 2);
  ASSERT_TRUE(service.ready()) << service.log();
  const std::string endpoint = service.endpoint();
  Proc holder({SERVICE_CLIENT_PATH, "hold-call", endpoint, "1"}, dir / "holder.err");
  ASSERT_NE(holder.expect("held", 20000 * kTimeFactor), "") << holder.story();
  // Once the flood has waited a second, fair share asks the holder for device 0 back (it holds
  // more than the flooder, a client of the same user, which holds nothing): the holder does not
  // hand it back, and the checks run on a client that holds nothing, so that changes nothing.
  Proc idle({SERVICE_CLIENT_PATH, "hold-call", endpoint, "0"}, dir / "idle.err");
  ASSERT_NE(idle.expect("held", 20000 * kTimeFactor), "") << idle.story();

  Raw flooder(service.socket());
  ASSERT_TRUE(flooder.connected()) << std::strerror(errno);
  const uint64_t id = flooder.hello("flooder");
  ASSERT_NE(id, 0u) << flooder.ended << "\n" << service.log();

  constexpr size_t kFlood = 20000;
  ASSERT_NO_FATAL_FAILURE(flood(flooder, 1, kFlood / 2, 0));
  // Others start while the service still reads the flood: a new process leases the other device
  // and releases it, another reads status, and a client connected before checks its own
  // connection (status, and a lease of the other device).
  Proc lease_during(lease_args(service, 1), dir / "lease-during.err");
  Proc status_during({GPUFLOW_CLI_PATH, "status", "--pool", endpoint}, dir / "status-during.err");
  idle.write("check\n");
  ASSERT_NO_FATAL_FAILURE(flood(flooder, 1 + kFlood / 2, kFlood / 2, 0));

  const Replies replies = drain(flooder, kFlood + 1);
  ASSERT_TRUE(replies.marker) << flooder.ended << "\n" << service.log();
  EXPECT_TRUE(replies.granted.empty());
  EXPECT_TRUE(replies.other.empty()) << replies.other.front();
  // The first 1024 wait; every one after them is refused, in order, naming the bound.
  ASSERT_NO_FATAL_FAILURE(
      expect_refused(replies, kPerClient + 1, kFlood - kPerClient,
                     "client " + std::to_string(id) + " already has 1024 lease requests waiting"));

  std::optional<int> leased = lease_during.wait(30000 * kTimeFactor);
  EXPECT_TRUE(leased && WIFEXITED(*leased) && WEXITSTATUS(*leased) == 0)
      << exit_text(leased) << "\n"
      << lease_during.story();
  std::string shown;
  while (std::optional<std::string> l = status_during.line(30000 * kTimeFactor)) shown += *l + "\n";
  std::optional<int> statused = status_during.wait(30000 * kTimeFactor);
  EXPECT_TRUE(statused && WIFEXITED(*statused) && WEXITSTATUS(*statused) == 0)
      << exit_text(statused) << "\n"
      << status_during.story();
  EXPECT_TRUE(contains(shown, "flooder")) << shown;
  EXPECT_EQ(idle.expect("", kWaitMs), "ok") << idle.story();

  // With the flood queued: the same again, and status counts the flooder's 1024.
  auto [rc, out] =
      run_cli(dir, {"lease", "--pool", endpoint, "--gpus", "1", "--device", "1", "--", "true"});
  EXPECT_EQ(rc, 0) << out;
  const json s = status(dir, service);
  EXPECT_EQ(queued_of(s, id), static_cast<int64_t>(kPerClient)) << s.dump();
  idle.write("check\n");
  EXPECT_EQ(idle.expect("", kWaitMs), "ok") << idle.story();
  std::string log = service.log();
  EXPECT_EQ(count_of(log, "'flooder'): lease requests refused: client " + std::to_string(id) +
                              " already has 1024 lease requests waiting, the most one client "
                              "may have"),
            1)
      << log;
  EXPECT_FALSE(contains(log, "'flooder') disconnected")) << log;

  // The bound is on requests waiting: one cancelled makes room for one more, not two.
  ASSERT_TRUE(flooder.send(cancel_frame(kFlood + 2, 2)));
  ASSERT_TRUE(flooder.send(request_frame(kFlood + 3, 0)));
  ASSERT_TRUE(flooder.send(request_frame(kFlood + 4, 0)));
  const Replies after_cancel = drain(flooder, kFlood + 5);
  ASSERT_TRUE(after_cancel.marker) << flooder.ended;
  EXPECT_EQ(after_cancel.cancelled, std::vector<uint64_t>{2});
  ASSERT_EQ(after_cancel.refused.size(), 2u);
  EXPECT_EQ(after_cancel.refused[0].request_id, 2u);
  EXPECT_EQ(after_cancel.refused[0].status, GF_ERR_CANCELLED);
  EXPECT_EQ(after_cancel.refused[1].request_id, kFlood + 4);
  EXPECT_EQ(after_cancel.refused[1].status, GF_ERR_STATE);

  // The queue still works: device 0 comes back and goes to the flooder's oldest request.
  holder.close_stdin();
  EXPECT_NE(holder.expect("bye", kWaitMs), "") << holder.story();
  std::optional<std::vector<uint8_t>> got = flooder.next(kWaitMs);
  ASSERT_TRUE(got) << flooder.ended << "\n" << service.log();
  const wire::LeaseGranted *granted = wire::message_of(*got)->body_as_LeaseGranted();
  ASSERT_TRUE(granted) << wire::body_name(wire::message_of(*got)->body_type());
  EXPECT_EQ(granted->request_id(), 1u);

  flooder.close();
  ASSERT_TRUE(wait_for_log(service, "'flooder') disconnected")) << service.log();
  log = service.log();
  EXPECT_TRUE(
      contains(log, "'flooder') disconnected; 1 lease(s) released, 1023 request(s) dropped"))
      << log;
  const json after = status(dir, service);
  EXPECT_TRUE(after["leases"].empty()) << after.dump();
  EXPECT_TRUE(after["queued"].empty()) << after.dump();
  for (Proc *p : {&holder, &idle}) {
    p->close_stdin();
    std::optional<int> done = p->wait(kWaitMs);
    EXPECT_TRUE(done && WIFEXITED(*done) && WEXITSTATUS(*done) == 0) << exit_text(done);
  }
}

// ---- a (ii): the flooding connections of one user share one bound ----

TEST_F(FairnessTest, OneUsersFloodingConnectionsShareOneBound) {
  Service service(dir, 2);
  ASSERT_TRUE(service.ready()) << service.log();
  Proc holder({SERVICE_CLIENT_PATH, "hold-call", service.endpoint(), "1"}, dir / "holder.err");
  ASSERT_NE(holder.expect("held", 20000 * kTimeFactor), "") << holder.story();
  Proc idle({SERVICE_CLIENT_PATH, "hold-call", service.endpoint(), "0"}, dir / "idle.err");
  ASSERT_NE(idle.expect("held", 20000 * kTimeFactor), "") << idle.story();

  // Five connections of this test's user, 1100 requests each, one after the other: the first
  // four get 1024 queued each (4096 in all) and 76 refused on their own bound; the fifth gets
  // nothing queued, every request refused on the user's bound.
  constexpr size_t kEach = 1100;
  constexpr size_t kConnections = 5;
  static_assert((kConnections - 1) * kPerClient == kPerUser);
  std::vector<std::unique_ptr<Raw>> flooders;
  std::vector<uint64_t> ids;
  for (size_t k = 0; k < kConnections; ++k) {
    SCOPED_TRACE("flooder " + std::to_string(k + 1));
    flooders.push_back(std::make_unique<Raw>(service.socket()));
    Raw &f = *flooders.back();
    ASSERT_TRUE(f.connected()) << std::strerror(errno);
    ids.push_back(f.hello("flooder " + std::to_string(k + 1)));
    ASSERT_NE(ids.back(), 0u) << f.ended << "\n" << service.log();
    ASSERT_NO_FATAL_FAILURE(flood(f, 1, kEach, 0, 250));
    const Replies r = drain(f, kEach + 1);
    ASSERT_TRUE(r.marker) << f.ended << "\n" << service.log();
    if (k + 1 < kConnections) {
      ASSERT_NO_FATAL_FAILURE(
          expect_refused(r, kPerClient + 1, kEach - kPerClient,
                         "client " + std::to_string(ids.back()) + " already has 1024"));
    } else {
      ASSERT_NO_FATAL_FAILURE(expect_refused(
          r, 1, kEach,
          "already has 4096 lease requests waiting, the most one user's clients may have "
          "together"));
    }
  }
  json s = status(dir, service);
  for (size_t k = 0; k < kConnections; ++k)
    EXPECT_EQ(queued_of(s, ids[k]), k + 1 < kConnections ? 1024 : 0) << k << " " << s.dump();
  EXPECT_TRUE(wait_for_log(service, "'flooder 5'): lease requests refused: user "))
      << service.log();
  // A request that would not wait is no flood: the fifth connection, over its user's bound,
  // still gets the free device at once, and hands it back.
  {
    Raw &fifth = *flooders[4];
    constexpr uint64_t kFree = kEach + 10;
    ASSERT_TRUE(fifth.send(request_frame(kFree, 1)));
    uint64_t lease = 0;
    while (std::optional<std::vector<uint8_t>> got = fifth.next(kWaitMs)) {
      const wire::Message *m = wire::message_of(*got);
      if (const auto *g = m->body_as_LeaseGranted(); g && g->request_id() == kFree) {
        lease = g->lease_id();
        break;
      }
      if (const auto *r = m->body_as_LeaseRefused()) {
        ADD_FAILURE() << "refused: " << (r->reason() ? r->reason()->str() : "");
        break;
      }
    }
    ASSERT_NE(lease, 0u) << fifth.ended << "\n" << service.log();
    fb::FlatBufferBuilder b;
    ASSERT_TRUE(fifth.send(wire::frame_of(b, wire::CreateLeaseRelease(b, kFree + 1, lease))));
    bool released = false;
    while (!released) {
      std::optional<std::vector<uint8_t>> got = fifth.next(kWaitMs);
      ASSERT_TRUE(got) << fifth.ended;
      released = wire::message_of(*got)->body_as_Released() != nullptr;
    }
  }

  // One request of another connection cancelled: the fifth gets one queued, not two.
  Raw &first = *flooders[0];
  Raw &fifth = *flooders[4];
  ASSERT_TRUE(first.send(cancel_frame(kEach + 2, 1)));
  const Replies cancelled = drain(first, kEach + 3);
  ASSERT_TRUE(cancelled.marker) << first.ended;
  EXPECT_EQ(cancelled.cancelled, std::vector<uint64_t>{1});
  ASSERT_TRUE(fifth.send(request_frame(kEach + 2, 0)));
  ASSERT_TRUE(fifth.send(request_frame(kEach + 3, 0)));
  Replies one_more = drain(fifth, kEach + 4);
  ASSERT_TRUE(one_more.marker) << fifth.ended;
  ASSERT_NO_FATAL_FAILURE(expect_refused(one_more, kEach + 3, 1, "already has 4096"));

  // A connection that goes takes its requests with it, and the room is the others'.
  flooders[1].reset();
  ASSERT_TRUE(wait_for_log(service,
                           "'flooder 2') disconnected; 0 lease(s) released, 1024 "
                           "request(s) dropped"))
      << service.log();
  ASSERT_TRUE(fifth.send(request_frame(kEach + 5, 0)));
  one_more = drain(fifth, kEach + 6);
  ASSERT_TRUE(one_more.marker) << fifth.ended;
  EXPECT_TRUE(one_more.refused.empty()) << one_more.refused.front().reason;
  s = status(dir, service);
  EXPECT_EQ(queued_of(s, ids[0]), 1023) << s.dump();
  EXPECT_EQ(queued_of(s, ids[1]), -1) << s.dump();
  EXPECT_EQ(queued_of(s, ids[4]), 2) << s.dump();
  EXPECT_EQ(s["queued"].size() + s["queued_omitted"].get<size_t>(), 1023u + 1024 + 1024 + 2)
      << s.dump();

  idle.write("check\n");  // under the bound: status, and a lease of the other device
  EXPECT_EQ(idle.expect("", kWaitMs), "ok") << idle.story();

  flooders.clear();
  for (Proc *p : {&holder, &idle}) {
    p->close_stdin();
    EXPECT_NE(p->expect("bye", kWaitMs), "") << p->story();
    std::optional<int> done = p->wait(kWaitMs);
    EXPECT_TRUE(done && WIFEXITED(*done) && WEXITSTATUS(*done) == 0) << exit_text(done);
  }
}

// ---- b: the Hello deadline on unix connections ----

// A connection that sends nothing and one that sends half a Hello are both dropped at the
// deadline (10 s), not before; a greeted connection opened beside them stays.
TEST_F(FairnessTest, AUnixConnectionWithoutHelloIsDroppedAtTheDeadline) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  const int64_t start = now_ns();
  Raw silent(service.socket());
  Raw halfway(service.socket());
  Raw greeted(service.socket());
  ASSERT_TRUE(silent.connected() && halfway.connected() && greeted.connected())
      << std::strerror(errno);
  std::vector<uint8_t> half = hello_frame("halfway");
  half.resize(half.size() / 2);
  ASSERT_TRUE(halfway.send(half));
  ASSERT_NE(greeted.hello("greeted"), 0u) << greeted.ended << "\n" << service.log();

  EXPECT_TRUE(silent.closed_by_peer(30000 * kTimeFactor)) << service.log();
  // The service's clock for it started at its accept, after this test's connect: never sooner
  // than the deadline (a lower bound a slow machine cannot break).
  EXPECT_GE(ms_since(start), 9900);
  EXPECT_TRUE(halfway.closed_by_peer(30000 * kTimeFactor)) << service.log();
  ASSERT_TRUE(wait_for_log(service, "disconnected: no Hello within 10 s", 2)) << service.log();
  const std::string log = service.log();
  EXPECT_EQ(count_of(log, "disconnected: no Hello within 10 s"), 2) << log;
  EXPECT_FALSE(contains(log, "in the middle of a frame")) << log;
  EXPECT_FALSE(contains(log, "'greeted') disconnected")) << log;

  // The greeted connection still gets answers.
  ASSERT_TRUE(greeted.send(marker_frame(7)));
  std::optional<std::vector<uint8_t>> got = greeted.next(kWaitMs);
  ASSERT_TRUE(got) << greeted.ended;
  const wire::Error *e = wire::message_of(*got)->body_as_Error();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->request_id(), 7u);
}

// ---- c: connections per user ----

TEST_F(FairnessTest, OneUserHoldsAtMost256Connections) {
  // 256 connections here and a few descriptors more; the service inherits this limit too.
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  ::getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < 2 * kConnectionsPerUser + 64)
    GTEST_SKIP() << "needs " << 2 * kConnectionsPerUser + 64 << " open files, may have "
                 << files.rlim_cur;
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();

  std::vector<std::unique_ptr<Raw>> open;
  for (size_t k = 0; k < kConnectionsPerUser; ++k) {
    open.push_back(std::make_unique<Raw>(service.socket()));
    ASSERT_TRUE(open.back()->connected()) << k << ": " << std::strerror(errno);
    ASSERT_NE(open.back()->hello("conn " + std::to_string(k)), 0u)
        << k << ": " << open.back()->ended << "\n"
        << service.log();
  }
  // The next ones: the kernel takes the connect; the service says why and closes them at accept.
  const std::string bound = "has 256 open to it, the most one user may have";
  auto expect_turned_away = [&](Raw &more) {
    std::optional<std::vector<uint8_t>> got = more.next(30000 * kTimeFactor);
    ASSERT_TRUE(got) << more.ended;
    const wire::Error *e = wire::message_of(*got)->body_as_Error();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status(), GF_ERR_STATE);
    EXPECT_TRUE(contains(e->message() ? e->message()->str() : "", bound));
    EXPECT_EQ(more.next(30000 * kTimeFactor), std::nullopt);
    EXPECT_TRUE(contains(more.ended, "closed")) << "'" << more.ended << "'";
  };
  for (int k = 0; k < 2; ++k) {
    Raw more(service.socket());
    ASSERT_TRUE(more.connected()) << std::strerror(errno);
    more.send(hello_frame("one too many"));
    expect_turned_away(more);
  }
  auto [refused_rc, refused_out] = run_cli(dir, {"status", "--pool", service.endpoint()});
  EXPECT_NE(refused_rc, 0) << refused_out;
  EXPECT_TRUE(contains(refused_out, bound)) << refused_out;
  const std::string said = "refused: the user has 256 open, the most one user may have";
  ASSERT_TRUE(wait_for_log(service, said)) << service.log();
  std::string log = service.log();
  EXPECT_EQ(count_of(log, said), 1) << "logged once, not for each: " << log;
  EXPECT_EQ(count_of(log, "'one too many'"), 0) << log;

  // The ones open still answer.
  ASSERT_TRUE(open.front()->send(marker_frame(3)));
  EXPECT_TRUE(open.front()->next(kWaitMs)) << open.front()->ended;

  // Some close: new ones are taken again, up to the bound.
  constexpr size_t kClosed = 8;
  const int before = count_of(log, " disconnected");
  open.erase(open.end() - kClosed, open.end());
  ASSERT_TRUE(wait_for_log(service, " disconnected", before + static_cast<int>(kClosed)))
      << service.log();
  auto [rc, out] = run_cli(dir, {"status", "--pool", service.endpoint()});
  EXPECT_EQ(rc, 0) << out;
  for (size_t k = 0; k < kClosed; ++k) {
    open.push_back(std::make_unique<Raw>(service.socket()));
    ASSERT_NE(open.back()->hello("again " + std::to_string(k)), 0u)
        << k << ": " << open.back()->ended << "\n"
        << service.log();
  }
  Raw over(service.socket());
  over.send(hello_frame("over again"));
  expect_turned_away(over);
  // Logged again: the user had been under the bound in between.
  ASSERT_TRUE(wait_for_log(service, said, 2)) << service.log();

  open.clear();
  ASSERT_TRUE(
      wait_for_log(service, " disconnected",
                   before + static_cast<int>(kClosed) + 1 + static_cast<int>(kConnectionsPerUser)))
      << service.log();
}

}  // namespace
