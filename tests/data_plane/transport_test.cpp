// The UCX data plane (issue 13, item 1) against a real `gpuflow serve` process: blobs put and
// got back byte for byte from 0 B to 256 MiB; a client killed mid-put and a service killed
// mid-get (the other side fails naming its peer, nothing is left behind, nobody hangs); no
// network socket opened by the data plane; garbage refused without harm. The test process is a
// client itself (client::Connection); blob_client is a second, killable one.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "pattern.hpp"
#include "processes.hpp"
#include "service/server.hpp"
#include "transport/blob_host.hpp"
#include "transport/blob_store.hpp"
#include "transport/endpoint.hpp"
#include "transport/ucx_context.hpp"
#include "wire/framing.hpp"

using namespace gfsvc;

namespace {

struct PlaneStatus {
  uint64_t blob_bytes = 0;                     // the service's, all clients
  std::map<uint32_t, std::string> transports;  // by client pid
  std::map<uint32_t, uint64_t> client_bytes;
};

PlaneStatus plane_status(gf::client::Connection &c) {
  std::vector<uint8_t> payload = c.leases().status();
  const gf::wire::StatusReply &s = *gf::wire::message_of(payload)->body_as_StatusReply();
  PlaneStatus out;
  out.blob_bytes = s.blob_bytes();
  if (s.clients()) {
    for (const gf::wire::ClientStatus *k : *s.clients()) {
      if (k->data_plane()) out.transports[k->pid()] = k->data_plane()->str();
      out.client_bytes[k->pid()] = k->blob_bytes();
    }
  }
  return out;
}

// Waits until the service holds no blob bytes at all.
bool wait_no_blob_bytes(gf::client::Connection &c, uint64_t &last) {
  const int64_t start = now_ns();
  while (ms_since(start) < 10000 * kTimeFactor) {
    last = plane_status(c).blob_bytes;
    if (last == 0) return true;
    ::usleep(20000);
  }
  return false;
}

std::string blob_client() {
  return BLOB_CLIENT_PATH;
}

class TransportTest : public ::testing::Test {
 protected:
  TempDir dir;
};

void round_trip(gf::client::Connection &c, uint64_t blob, size_t size) {
  const std::vector<uint8_t> bytes = pattern(size, size + 7);
  c.blobs().put(blob, bytes.data(), bytes.size());
  const std::vector<uint8_t> back = c.blobs().get(blob);
  EXPECT_EQ(first_difference(bytes, back), "") << "blob of " << size << " bytes";
}

// ---- Round trips ----

TEST_F(TransportTest, RoundTripsFromZeroBytesTo16MiB) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
  ASSERT_TRUE(c->welcome().data_plane);
  uint64_t blob = 1;
  for (size_t size : {size_t{0}, size_t{1}, size_t{64} << 10, size_t{1} << 20, size_t{16} << 20}) {
    round_trip(*c, blob++, size);
  }
  // Every blob stays until dropped, counted per client and for the service.
  PlaneStatus s = plane_status(*c);
  const uint64_t held = 1 + (64u << 10) + (1u << 20) + (16u << 20);
  EXPECT_EQ(s.client_bytes[::getpid()], held);
  EXPECT_EQ(s.blob_bytes, held);
  // What UCX picked is reported, and is shared memory (docs/transport.md).
  const std::string transports = s.transports[::getpid()];
  EXPECT_NE(transports, "");
  EXPECT_EQ(transports.find("tcp"), std::string::npos) << transports;
  EXPECT_EQ(c->blobs().data_plane_transports(), c->blobs().data_plane_transports());
  std::printf("UCX transports: service side '%s', client side '%s'\n", transports.c_str(),
              c->blobs().data_plane_transports().c_str());
  auto [rc, json] = run_cli(dir, {"status", "--json", "--pool", service.endpoint()});
  EXPECT_EQ(rc, 0) << json;
  EXPECT_TRUE(contains(json, "\"data_plane\":\"" + transports + "\"")) << json;
  // Debian's UCX has no CUDA transport: device data is staged through host memory, and says so.
  const bool cuda = transports.find("cuda") != std::string::npos;
  EXPECT_TRUE(contains(json, std::string("\"device_data\":\"") + (cuda ? "cuda" : "host-staged")))
      << json;
  auto [text_rc, text] = run_cli(dir, {"status", "--pool", service.endpoint()});
  EXPECT_EQ(text_rc, 0) << text;
  EXPECT_TRUE(contains(text, cuda ? " cuda " : " host-staged ")) << text;
  for (uint64_t b = 1; b < blob; ++b) c->blobs().drop_blob(b);
  EXPECT_EQ(plane_status(*c).blob_bytes, 0u);
  // A put that replaces a blob, and a blob got twice.
  round_trip(*c, 9, 1000);
  round_trip(*c, 9, 3000);
  EXPECT_EQ(c->blobs().get(9), c->blobs().get(9));
  c.reset();
  const int64_t start = now_ns();
  while (!contains(service.log(), "data plane closed, 3000 blob byte(s) freed") &&
         ms_since(start) < 5000 * kTimeFactor) {
    ::usleep(10000);
  }
  EXPECT_TRUE(contains(service.log(), "data plane closed, 3000 blob byte(s) freed"))
      << service.log();
}

TEST_F(TransportTest, RoundTrip256MiB) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
  round_trip(*c, 1, size_t{256} << 20);
}

// Two clients at once, each in its own tag space.
TEST_F(TransportTest, TwoClientsAtOnce) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto a = gf::client::Connection::open(service.endpoint(), "a", 1);
  auto b = gf::client::Connection::open(service.endpoint(), "b", 1);
  std::thread other([&] {
    for (int i = 0; i < 20; ++i) round_trip(*b, 1, size_t{1} << 20);
  });
  for (int i = 0; i < 20; ++i) round_trip(*a, 1, (size_t{1} << 20) + 1);
  other.join();
}

// ---- Peer failure ----

TEST_F(TransportTest, ClientKilledMidPutLeavesNothingBehind) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto watcher = gf::client::Connection::open(service.endpoint(), "watcher", 1);
  // Announced and never sent: the service holds its 64 MiB receive buffer.
  {
    Proc stalled({blob_client(), service.endpoint(), "stall", std::to_string(64 << 20)},
                 dir / "stall.err");
    ASSERT_NE(stalled.expect("announced", 20000 * kTimeFactor), "") << stalled.story();
    EXPECT_EQ(plane_status(*watcher).client_bytes[stalled.pid()], uint64_t{64} << 20);
    stalled.signal(SIGKILL);
    stalled.wait(5000 * kTimeFactor);
    uint64_t left = 0;
    EXPECT_TRUE(wait_no_blob_bytes(*watcher, left)) << left << " bytes\n" << service.log();
    EXPECT_TRUE(contains(service.log(), "(pid " + std::to_string(stalled.pid()))) << service.log();
  }
  // Killed while 256 MiB puts stream.
  {
    Proc looping({blob_client(), service.endpoint(), "loop", std::to_string(256 << 20)},
                 dir / "loop.err");
    ASSERT_NE(looping.expect("put 1", 60000 * kTimeFactor), "") << looping.story();
    ::usleep(30000);
    looping.signal(SIGKILL);
    looping.wait(5000 * kTimeFactor);
    uint64_t left = 0;
    EXPECT_TRUE(wait_no_blob_bytes(*watcher, left)) << left << " bytes\n" << service.log();
    const std::string log = service.log();
    EXPECT_TRUE(contains(log, "(pid " + std::to_string(looping.pid()) + ", ")) << log;
  }
  // The service and its other clients carry on.
  round_trip(*watcher, 5, size_t{1} << 20);
  Proc other({blob_client(), service.endpoint(), "roundtrip", std::to_string(1 << 20)},
             dir / "other.err");
  EXPECT_NE(other.expect("ok", 30000 * kTimeFactor), "") << other.story();
}

TEST_F(TransportTest, ServiceKilledMidGetFailsNamingIt) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
  const std::vector<uint8_t> bytes = pattern(size_t{64} << 20, 3);
  c->blobs().put(1, bytes.data(), bytes.size());
  std::atomic<int> gets{0};
  std::atomic<int64_t> failed_at{0};
  std::string error;
  std::thread getter([&] {
    try {
      for (;;) {
        c->blobs().get(1);
        ++gets;
      }
    } catch (const gf::Error &e) {
      error = e.what();
      failed_at = now_ns();
    }
  });
  while (gets.load() < 2) ::usleep(1000);
  const int64_t killed_at = now_ns();
  service.proc().signal(SIGKILL);
  service.proc().wait(5000 * kTimeFactor);
  getter.join();
  std::printf("after %d gets, %lld ms after the kill: %s\n", gets.load(),
              static_cast<long long>((failed_at.load() - killed_at) / 1000000), error.c_str());
  EXPECT_TRUE(contains(error, service.endpoint())) << error;
  EXPECT_LT((failed_at.load() - killed_at) / 1000000, 2000 * kTimeFactor) << error;
  // Every later call fails the same way, at once.
  EXPECT_THROW(c->blobs().get(1), gf::Error);
  EXPECT_THROW(c->blobs().put(2, bytes.data(), 10), gf::Error);
}

// ---- Security: no network socket ----

TEST_F(TransportTest, DataPlaneOpensNoNetworkSocket) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
  round_trip(*c, 1, size_t{1} << 20);
  const std::set<std::string> mine = socket_inodes_of(service.proc().pid());
  EXPECT_FALSE(mine.empty());  // its unix sockets at least
  for (const char *table : {"tcp", "tcp6", "udp", "udp6", "raw", "raw6"}) {
    std::ifstream in(std::string("/proc/net/") + table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<std::string> w = words(line);
      ASSERT_GE(w.size(), 10u) << line;
      EXPECT_EQ(mine.count(w[9]), 0u)
          << "the service owns a " << table << " socket: " << line << "\n"
          << service.log();
    }
  }
}

// ---- Refusals ----

TEST_F(TransportTest, GarbageIsRefusedWithoutHarm) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
  const uint64_t cap = c->blobs().blob_cap();
  // An absurd size: over the cap.
  try {
    c->blobs().announce_put(1, cap + 1);
    ADD_FAILURE() << "a put over the cap was accepted";
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "cap")) << e.what();
  }
  try {
    c->blobs().announce_put(1, ~uint64_t{0});
    ADD_FAILURE() << "a put of 2^64-1 bytes was accepted";
  } catch (const gf::Error &e) {
    EXPECT_TRUE(contains(e.what(), "cap")) << e.what();
  }
  // A tag outside the client's space (another client's, or 0).
  for (uint64_t tag : {uint64_t{1}, (uint64_t{c->welcome().client_id} + 1) << 32}) {
    try {
      c->blobs().announce_put(1, 10, tag);
      ADD_FAILURE() << "tag " << tag << " was accepted";
    } catch (const gf::Error &e) {
      EXPECT_TRUE(contains(e.what(), "tag space")) << e.what();
    }
  }
  // An unknown blob.
  try {
    c->blobs().get(77);
    ADD_FAILURE() << "an unknown blob was sent";
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_NOT_FOUND);
    EXPECT_TRUE(contains(e.what(), "no blob 77")) << e.what();
  }
  EXPECT_THROW(c->blobs().drop_blob(77), gf::Error);
  // Still fine afterwards, and nothing held.
  round_trip(*c, 1, 4096);
  c->blobs().drop_blob(1);
  EXPECT_EQ(plane_status(*c).blob_bytes, 0u);
}

// A raw connection: frames built by hand, answers read back verified.
class RawClient {
 public:
  explicit RawClient(const std::string &socket) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", socket.c_str());
    if (::connect(fd_, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
    }
  }
  ~RawClient() { ::close(fd_); }
  void send(const std::vector<uint8_t> &frame) {
    ASSERT_EQ(::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(frame.size()));
  }
  // Says Hello as a client named "raw"; the answer as next() gives it ("Welcome").
  std::string hello() {
    flatbuffers::FlatBufferBuilder b;
    send(gf::wire::frame_of(
        b, gf::wire::CreateHello(b, gf::wire::kProtocolVersion, b.CreateString("raw"), 1, 0)));
    return next(5000 * kTimeFactor);
  }
  // The next message's body type and, for an Error, its text; "" when the connection closed.
  std::string next(int timeout_ms) {
    std::vector<uint8_t> payload;
    std::string error;
    char buffer[4096];
    while (!reader_.next(payload, error)) {
      if (!error.empty()) return "bad frame: " + error;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return "timeout";
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return "";
      error = reader_.feed(buffer, static_cast<size_t>(n));
    }
    const gf::wire::Message *m = gf::wire::message_of(payload);
    std::string out = gf::wire::body_name(m->body_type());
    if (const auto *e = m->body_as_Error()) out += ": " + e->message()->str();
    return out;
  }

 private:
  int fd_ = -1;
  gf::wire::FrameReader reader_;
};

// Announced puts whose bytes never come each hold a receive until they expire: a client cannot
// pile up more than BlobHost::kMaxPutsInFlight of them, even of 0 bytes, and the service frees
// them all when it goes.
TEST_F(TransportTest, PutsInFlightAreBounded) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  {
    auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
    const size_t limit = gf::transport::BlobHost::kMaxPutsInFlight;
    for (size_t i = 0; i < limit; ++i)
      ASSERT_NO_THROW(c->blobs().announce_put(1000 + i, i % 2 ? 0 : 16));
    try {
      c->blobs().announce_put(1, 0);
      ADD_FAILURE() << "put " << limit + 1 << " in flight was accepted";
    } catch (const gf::Error &e) {
      EXPECT_TRUE(contains(e.what(), "too many puts in flight")) << e.what();
    }
    EXPECT_GT(plane_status(*c).blob_bytes, 0u) << "the announced puts hold their bytes";
  }
  // Their client gone, nothing is left: another client sees no blob bytes and works.
  auto other = gf::client::Connection::open(service.endpoint(), "transport_test other", 1);
  uint64_t left = 0;
  EXPECT_TRUE(wait_no_blob_bytes(*other, left)) << left << " byte(s) left";
  round_trip(*other, 1, 4096);
}

TEST_F(TransportTest, RawFramesAreRefused) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  namespace fb = flatbuffers;
  RawClient raw(service.socket());
  ASSERT_EQ(raw.hello(), "Welcome");
  {  // blob messages before the data plane
    fb::FlatBufferBuilder b;
    raw.send(gf::wire::frame_of(b, gf::wire::CreateBlobPut(b, 1, 1, 10, 1ull << 32)));
    EXPECT_TRUE(contains(raw.next(5000 * kTimeFactor), "no data plane"));
  }
  {  // addresses of absurd sizes
    for (size_t size : {size_t{0}, size_t{3}, size_t{100000}}) {
      fb::FlatBufferBuilder b;
      std::vector<uint8_t> junk(size, 0xAB);
      raw.send(gf::wire::frame_of(
          b, gf::wire::CreateDataPlaneHello(b, 2, size ? b.CreateVector(junk) : 0)));
      EXPECT_TRUE(contains(raw.next(5000 * kTimeFactor), "UCX worker address of 8 to 4096 bytes"));
    }
  }
  // The service is fine, and serves a real client.
  auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
  round_trip(*c, 1, 100);
  EXPECT_TRUE(contains(service.log(), "has a data plane")) << service.log();
}

// A client whose side of the data plane failed asks for a new one: the service lets the old one
// go (saying so) and answers with a new welcome, rather than "you already have a data plane".
TEST_F(TransportTest, ASecondDataPlaneHelloReplacesTheFirst) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  namespace fb = flatbuffers;
  RawClient raw(service.socket());
  ASSERT_EQ(raw.hello(), "Welcome");
  std::vector<std::unique_ptr<gf::transport::Worker>> workers;
  for (uint64_t request : {2, 3}) {
    workers.push_back(gf::transport::Worker::create("raw client"));
    fb::FlatBufferBuilder b;
    raw.send(gf::wire::frame_of(
        b, gf::wire::CreateDataPlaneHello(b, request, b.CreateVector(workers.back()->address()))));
    EXPECT_EQ(raw.next(5000 * kTimeFactor), "DataPlaneWelcome") << request;
  }
  EXPECT_TRUE(contains(service.log(), "asked for a new data plane; the old one goes"))
      << service.log();
  auto c = gf::client::Connection::open(service.endpoint(), "transport_test", 1);
  round_trip(*c, 1, 100);
}

// A put whose bytes come with another tag: the service stops waiting at its deadline and says
// so; the client's data plane goes down with it, the service and other clients do not.
TEST_F(TransportTest, BytesWithTheWrongTagTimeOut) {
  const std::string socket = dir / "inproc.sock";
  gf::service::ServiceOptions options;
  options.pool.backend = GF_BACKEND_HOST;
  options.pool.cpu_workers = 1;
  options.socket_path = socket;
  options.blob_put_timeout_s = 0.5;
  std::string log;
  std::mutex log_mu;
  options.log = [&](const std::string &line) {
    std::lock_guard lock(log_mu);
    log += line + "\n";
  };
  auto server = gf::service::Server::start(options);
  auto c = gf::client::Connection::open(server->endpoint(), "wrong tag", 1);
  gf::client::BlobClient::PutTicket t = c->blobs().announce_put(1, 100);
  const std::vector<uint8_t> bytes = pattern(100, 1);
  gf::client::BlobClient::PutTicket wrong = t;
  wrong.tag = t.tag + 1;
  try {
    c->blobs().finish_put(wrong, bytes.data());
    ADD_FAILURE() << "a put whose bytes never matched succeeded";
  } catch (const gf::Error &e) {
    EXPECT_TRUE(contains(e.what(), "no bytes with tag " + std::to_string(t.tag))) << e.what();
  }
  auto other = gf::client::Connection::open(server->endpoint(), "other", 1);
  round_trip(*other, 1, 1 << 16);
  EXPECT_EQ(plane_status(*other).client_bytes[::getpid()] >= (1u << 16), true);
  c.reset();
  other.reset();
  server->stop();
}

// A put is one control message with its bytes sent at once (no BlobPutReady to wait for): when
// the service refuses it, the bytes already on their way are drained, so the client's send ends,
// the put fails naming why, and the data plane goes on. Eager (200 B) and rendezvous (1.5 MiB)
// sizes, each refused twice.
TEST_F(TransportTest, RefusedPutsDrainTheirBytesAndTheDataPlaneGoesOn) {
  gf::service::ServiceOptions options;
  options.pool.backend = GF_BACKEND_HOST;
  options.pool.cpu_workers = 1;
  options.socket_path = dir / "drain.sock";
  options.blob_cap = 4 << 20;
  options.log = [](const std::string &) {};
  auto server = gf::service::Server::start(options);
  auto c = gf::client::Connection::open(server->endpoint(), "drain", 1);
  const std::vector<uint8_t> kept = pattern((4 << 20) - 100, 3);
  c->blobs().put(1, kept.data(), kept.size());
  for (size_t size : {size_t{200}, size_t{3} << 19, size_t{200}, size_t{3} << 19}) {
    const std::vector<uint8_t> bytes = pattern(size, size);
    try {
      c->blobs().put(2, bytes.data(), bytes.size());
      ADD_FAILURE() << "a put of " << size << " bytes past the cap was accepted";
    } catch (const gf::Error &e) {
      EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT) << e.what();
      EXPECT_TRUE(contains(e.what(), "cap")) << e.what();
    }
  }
  EXPECT_EQ(first_difference(kept, c->blobs().get(1)), "");
  EXPECT_EQ(plane_status(*c).client_bytes[::getpid()], kept.size());
  c->blobs().drop_blob(1);
  round_trip(*c, 2, 3 << 19);
  EXPECT_EQ(plane_status(*c).client_bytes[::getpid()], size_t{3} << 19);
  c.reset();
  server->stop();
}

// ---- Another user ----

TEST_F(TransportTest, AnotherUserGetsNoDataPlane) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid (nobody)";
  Service service(dir, 1, {"--group", "nogroup"});
  ASSERT_TRUE(service.ready()) << service.log();
  Proc nobody({blob_client(), service.endpoint(), "nobody"}, dir / "nobody.err");
  const std::string line = nobody.expect("refused", 20000 * kTimeFactor);
  EXPECT_TRUE(contains(line, "refused " + std::to_string(GF_ERR_STATE))) << nobody.story();
  EXPECT_TRUE(contains(line, "only for processes of the service's own user")) << line;
  EXPECT_TRUE(contains(service.log(), "data plane refused: uid 65534")) << service.log();
}

// ---- Pieces, without a service ----

TEST(BlobStore, CapReservationsAndKeptBuffers) {
  auto tally = std::make_shared<gf::transport::BlobTally>();
  gf::transport::BlobStore store(uint64_t{16} << 20, tally);
  gf::transport::Refusal why;
  auto a = store.reserve(1, uint64_t{4} << 20, why);
  ASSERT_TRUE(a) << why.why;
  EXPECT_FALSE(store.reserve(2, (uint64_t{12} << 20) + 1, why));  // 4 MiB reserved already
  EXPECT_TRUE(contains(why.why, "cap of 16777216 bytes")) << why.why;
  EXPECT_EQ(why.status, GF_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(store.reserve(2, ~uint64_t{0}, why));
  uint8_t *first = a->data();
  store.commit(1, a);
  a.reset();
  // Replacing blob 1 may use the whole cap: its old bytes go when the new ones are in.
  auto b = store.reserve(1, uint64_t{8} << 20, why);
  ASSERT_TRUE(b) << why.why;
  store.commit(1, b);
  b.reset();
  EXPECT_EQ(tally->bytes.load(), uint64_t{8} << 20);
  EXPECT_EQ(tally->kept(), uint64_t{4} << 20);  // blob 1's first buffer, for the next 4 MiB put
  auto c = store.reserve(2, 1, why);            // alive while blob 1 goes: buffers stay kept
  EXPECT_TRUE(c) << why.why;
  store.abandon(1);
  store.drop(1);
  auto d = store.reserve(3, uint64_t{4} << 20, why);
  ASSERT_TRUE(d) << why.why;
  EXPECT_EQ(d->data(), first);  // reused, not faulted in again
  store.abandon(d->size());
  d.reset();
  c.reset();
  EXPECT_EQ(store.bytes(), 0u);
  EXPECT_EQ(tally->bytes.load(), 0u);
  EXPECT_EQ(tally->kept(), 0u);  // nothing alive: nothing kept
}

TEST(Endpoint, TransportsFromPrintInfo) {
  const std::string text =
      "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
      "#                 lane[0]:  0:posix/memory.0 md[0]   -> md[0]/posix/sysdev[255] am am_bw#0\n"
      "#                 lane[1]:  5:cma/memory.0 md[4]     -> md[4]/cma/sysdev[255] rma_bw#0\n"
      "#                 lane[2]:  0:posix/memory.0 md[0]   -> md[0]/posix/sysdev[255] am_bw#1\n"
      "#                tag_send: 0..<egr/short>..8185..<egr/bcopy>..8192..<rndv>..(inf)\n";
  EXPECT_EQ(gf::transport::transports_of_ep_info(text), "posix/memory,cma/memory");
  EXPECT_EQ(gf::transport::transports_of_ep_info("lane[0]: garbage\n"), "");
  EXPECT_EQ(gf::transport::transports_of_ep_info(""), "");
}

}  // namespace
