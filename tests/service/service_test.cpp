// The node's service with real processes (issue 12, "Tests"): `gpuflow serve` runs as its own
// process, clients are service_client processes (service_client.c documents its modes), and
// everything talks over unix sockets in a fresh temporary directory per test. What is checked is
// what a user of a shared node relies on: no device is ever given out twice, whatever clients do;
// a client that dies, or a service that dies or stops, never leaves a caller blocked or a lease
// stranded; garbage on one connection harms no other; fair share and reservations hold.
//
// Timing assertions (a lease back within 1 s, a blocked call returning within 5 s) stretch by
// GPUFLOW_TEST_TIME_FACTOR in sanitizer builds only; the work done is bounded by counts.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuflow.h"
#include "processes.hpp"
#include "wire/framing.hpp"

using namespace gfsvc;

namespace {

namespace fb = flatbuffers;

std::string status_json(const TempDir &dir, const Service &service) {
  auto [rc, out] = run_cli(dir, {"status", "--json", "--pool", service.endpoint()});
  EXPECT_EQ(rc, 0) << out;
  return out;
}

// The JSON array after "key":[ (without brackets), for the flat checks below.
std::string json_array(const std::string &json, const std::string &key) {
  const std::string open = "\"" + key + "\":[";
  size_t at = json.find(open);
  if (at == std::string::npos) return "<no " + key + ">";
  at += open.size();
  int depth = 1;
  size_t end = at;
  for (; end < json.size() && depth > 0; ++end) {
    if (json[end] == '[') ++depth;
    if (json[end] == ']') --depth;
  }
  return json.substr(at, end - at - 1);
}

int count_of(const std::string &text, const std::string &part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The service is idle: no lease, nothing queued, nothing in use on any device.
void expect_status_clean(const TempDir &dir, const Service &service) {
  const std::string json = status_json(dir, service);
  EXPECT_EQ(json_array(json, "leases"), "") << json;
  EXPECT_EQ(json_array(json, "queued"), "") << json;
  const std::string devices = json_array(json, "devices");
  EXPECT_GT(count_of(devices, "\"share_in_use\":"), 0) << json;
  EXPECT_EQ(count_of(devices, "\"share_in_use\":"), count_of(devices, "\"share_in_use\":0,"))
      << json;
  EXPECT_EQ(count_of(devices, "\"memory_in_use\":"), count_of(devices, "\"memory_in_use\":0,"))
      << json;
}

// Waits until status shows `n` queued requests of process `pid` (true), or gives up.
bool wait_queued(const TempDir &dir, const Service &service, pid_t pid, int n) {
  const int64_t start = now_ns();
  while (ms_since(start) < 10000 * kTimeFactor) {
    const std::string queued = json_array(status_json(dir, service), "queued");
    if (count_of(queued, "\"pid\":" + std::to_string(pid) + ",") >= n) return true;
    ::usleep(20000);
  }
  return false;
}

// ---- Records written by service_client: who held which share of which device when ----

struct Interval {
  char kind;  // 'L' lease, 'T' GPU task
  int pid;
  int device;
  double share;
  int64_t start, end;
};

std::vector<Interval> read_records(const std::string &path) {
  std::vector<Interval> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> w = words(line);
    if (w.size() != 6) {
      ADD_FAILURE() << path << ": bad record '" << line << "'";
      continue;
    }
    out.push_back({w[0][0], std::stoi(w[1]), std::stoi(w[2]), std::stod(w[3]), std::stoll(w[4]),
                   std::stoll(w[5])});
  }
  return out;
}

std::string describe(const Interval &i) {
  std::ostringstream s;
  s << (i.kind == 'L' ? "lease" : "GPU task") << " of pid " << i.pid << " on device " << i.device
    << " share " << i.share << " [" << i.start << ", " << i.end << "]";
  return s.str();
}

// Per device, the shares held at once never pass 1, and no GPU task of one process overlaps a
// lease or task of another. A process's own GPU tasks on a device (it may run several at once
// under its one whole-device lease) count as one whole-device interval while any of them runs.
// Returns how often an interval began while another was open on its device (a device shared).
int check_no_overcommit(const std::vector<Interval> &all) {
  int shared = 0;
  std::vector<Interval> merged;
  std::map<std::pair<int, int>, std::vector<Interval>> tasks;
  for (const Interval &i : all) {
    EXPECT_LE(i.start, i.end) << describe(i);
    if (i.kind == 'T') {
      tasks[{i.pid, i.device}].push_back(i);
    } else {
      merged.push_back(i);
    }
  }
  for (auto &[key, list] : tasks) {
    std::sort(list.begin(), list.end(),
              [](const Interval &a, const Interval &b) { return a.start < b.start; });
    Interval cur = list[0];
    for (size_t k = 1; k < list.size(); ++k) {
      if (list[k].start <= cur.end) {
        cur.end = std::max(cur.end, list[k].end);
      } else {
        merged.push_back(cur);
        cur = list[k];
      }
    }
    merged.push_back(cur);
  }
  for (const Interval &t : merged) {
    if (t.kind != 'T') continue;
    for (const Interval &o : merged) {
      if (o.pid == t.pid || o.device != t.device) continue;
      EXPECT_FALSE(o.start < t.end && t.start < o.end)
          << describe(t) << " overlaps " << describe(o);
    }
  }
  std::set<int> devices;
  for (const Interval &i : merged) devices.insert(i.device);
  for (int device : devices) {
    // Ends first at equal times: a release then a grant at the same nanosecond is no overlap.
    std::vector<std::tuple<int64_t, int, const Interval *>> sweep;
    for (const Interval &i : merged) {
      if (i.device != device) continue;
      sweep.emplace_back(i.start, 1, &i);
      sweep.emplace_back(i.end, 0, &i);
    }
    std::sort(sweep.begin(), sweep.end(), [](const auto &a, const auto &b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b)
                                              : std::get<1>(a) < std::get<1>(b);
    });
    std::vector<const Interval *> open;
    for (auto &[t, is_start, i] : sweep) {
      if (!is_start) {
        open.erase(std::find(open.begin(), open.end(), i));
        continue;
      }
      shared += open.empty() ? 0 : 1;
      open.push_back(i);
      double sum = 0;
      for (const Interval *o : open) sum += o->share;
      if (sum > 1 + 1e-9) {
        std::string who;
        for (const Interval *o : open) who += "\n  " + describe(*o);
        ADD_FAILURE() << "device " << device << " has " << sum << " of itself given out at " << t
                      << ":" << who;
        return shared;
      }
    }
  }
  return shared;
}

// The checker's failures on `records`, as text ("" when it passes them).
std::string checker_failures(const std::vector<Interval> &records) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check_no_overcommit(records);
  }
  std::string out;
  for (int i = 0; i < results.size(); ++i) out += results.GetTestPartResult(i).message();
  return out;
}

// The checker itself catches what it is there for.
TEST(OverCommitCheck, CatchesSharesAboveOneAndForeignOverlaps) {
  EXPECT_EQ(checker_failures({{'L', 1, 0, 0.5, 0, 10}, {'L', 2, 0, 0.5, 5, 15}}), "");
  EXPECT_EQ(checker_failures({{'L', 1, 0, 1, 0, 10}, {'L', 2, 0, 1, 10, 20}}), "");  // in turn
  EXPECT_EQ(checker_failures({{'T', 1, 0, 1, 0, 10}, {'T', 1, 0, 1, 5, 15}}), "");   // one pid
  EXPECT_EQ(checker_failures({{'L', 1, 0, 1, 0, 10}, {'L', 2, 1, 1, 0, 10}}), "");   // 2 devices
  EXPECT_TRUE(contains(checker_failures({{'L', 1, 0, 0.5, 0, 10}, {'L', 2, 0, 1, 9, 15}}),
                       "has 1.5 of itself"));
  EXPECT_TRUE(contains(checker_failures({{'T', 1, 0, 1, 0, 10}, {'L', 2, 0, 0.5, 9, 15}}),
                       "GPU task of pid 1 on device 0 share 1 [0, 10] overlaps lease of pid 2"));
}

std::vector<std::string> client(const std::string &mode, const Service &s,
                                std::vector<std::string> args) {
  std::vector<std::string> argv = {SERVICE_CLIENT_PATH, mode, s.endpoint()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
  TempDir dir;
};

// Runs `count` mix clients (service_client.c) and checks every record they wrote.
void run_mix_clients(const TempDir &dir, Service &service, int count, int iters,
                     int graph_every_nth_client, int graph_every) {
  std::vector<std::unique_ptr<Proc>> clients;
  for (int i = 0; i < count; ++i) {
    const int every = graph_every_nth_client && i % graph_every_nth_client == 0 ? graph_every : 0;
    clients.push_back(
        std::make_unique<Proc>(client("mix", service,
                                      {dir / ("rec" + std::to_string(i)), std::to_string(iters),
                                       std::to_string(every), std::to_string(1000 + i)}),
                               dir / ("client" + std::to_string(i) + ".err")));
  }
  std::vector<Interval> all;
  for (int i = 0; i < count; ++i) {
    Proc &c = *clients[i];
    EXPECT_NE(c.expect("done", 120000 * kTimeFactor), "") << "client " << i << ":\n" << c.story();
    std::optional<int> status = c.wait(30000 * kTimeFactor);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << "client " << i << ": " << exit_text(status) << "\n"
        << c.story();
    std::vector<Interval> r = read_records(dir / ("rec" + std::to_string(i)));
    EXPECT_EQ(std::count_if(r.begin(), r.end(), [](const Interval &x) { return x.kind == 'L'; }),
              iters)
        << "client " << i;
    all.insert(all.end(), r.begin(), r.end());
  }
  const auto tasks = std::count_if(all.begin(), all.end(), [](auto &x) { return x.kind == 'T'; });
  if (graph_every_nth_client) {
    EXPECT_GT(tasks, 0) << "no GPU task ran";
  }
  std::printf("%zu leases and GPU tasks; a device was shared %d times\n", all.size(),
              check_no_overcommit(all));
}

// ---- 1 ----

TEST_F(ServiceTest, NoDeviceIsOverCommittedAcrossProcesses) {
  Service service(dir, 2);
  ASSERT_TRUE(service.ready()) << service.log();
  // 6 processes, each 30 leases (whole devices and halves) and 10 graphs of 4 GPU tasks.
  run_mix_clients(dir, service, 6, 30, 1, 3);
  expect_status_clean(dir, service);
}

// ---- 2 ----

TEST_F(ServiceTest, SixtyFourClientsAtOnce) {
  Service service(dir, 4);
  ASSERT_TRUE(service.ready()) << service.log();
  // Every 16th client also runs graphs: 4 of them, 2 graphs each.
  run_mix_clients(dir, service, 64, 8, 16, 4);
  expect_status_clean(dir, service);
  auto [rc, out] = run_cli(dir, {"status", "--pool", service.endpoint()});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "gpuflow service at")) << out;
}

// ---- 3 ----

TEST_F(ServiceTest, KilledClientsLeasesComeBackAtOnce) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  Proc holder(client("hold", service, {"1", "2"}), dir / "holder.err");
  ASSERT_NE(holder.expect("held", 20000 * kTimeFactor), "") << holder.story();
  ASSERT_TRUE(wait_queued(dir, service, holder.pid(), 2)) << holder.story();
  Proc waiter(client("acquire", service, {"1", "-1"}), dir / "waiter.err");
  ASSERT_NE(waiter.expect("connected", 20000 * kTimeFactor), "") << waiter.story();
  ASSERT_TRUE(wait_queued(dir, service, waiter.pid(), 1));

  const int64_t killed = now_ns();
  holder.signal(SIGKILL);
  const std::string granted = waiter.expect("granted", 5000 * kTimeFactor);
  ASSERT_NE(granted, "") << waiter.story() << service.log();
  const int64_t took_ms = (std::stoll(words(granted)[1]) - killed) / 1000000;
  EXPECT_LT(took_ms, 1000 * kTimeFactor)
      << "the waiting client got the device " << took_ms << " ms after the holder was killed";
  // Nothing of the dead process is left: no lease, no queued request, no client (only its
  // ended lease, in the history timelines read).
  const std::string json = status_json(dir, service);
  const std::string dead = "\"pid\":" + std::to_string(holder.pid()) + ",";
  for (const char *list : {"leases", "queued", "clients"})
    EXPECT_FALSE(contains(json_array(json, list), dead)) << list << ": " << json;
  EXPECT_TRUE(contains(json_array(json, "ended"), dead)) << json;
  EXPECT_TRUE(contains(service.log(), "2 request(s) dropped")) << service.log();
  EXPECT_NE(waiter.expect("destroyed", 10000 * kTimeFactor), "") << waiter.story();
  expect_status_clean(dir, service);
}

// ---- 4 ----

TEST_F(ServiceTest, KilledServiceFailsEveryBlockedCallAndRestartsOnItsSocket) {
  auto service = std::make_unique<Service>(dir, 2);
  ASSERT_TRUE(service->ready()) << service->log();
  const std::string endpoint = service->endpoint();
  Proc holder(client("hold", *service, {"1", "0"}), dir / "holder.err");
  ASSERT_NE(holder.expect("held", 20000 * kTimeFactor), "") << holder.story();
  // A graph that keeps the other device busy for a long while (1000 tasks of 20 ms).
  Proc graph(client("graph", *service, {"1000", "20"}), dir / "graph.err");
  ASSERT_NE(graph.expect("running", 20000 * kTimeFactor), "") << graph.story();
  std::vector<std::unique_ptr<Proc>> blocked;
  for (int i = 0; i < 2; ++i) {
    blocked.push_back(std::make_unique<Proc>(client("acquire", *service, {"1", "-1"}),
                                             dir / ("blocked" + std::to_string(i) + ".err")));
    ASSERT_NE(blocked.back()->expect("connected", 20000 * kTimeFactor), "");
    ASSERT_TRUE(wait_queued(dir, *service, blocked.back()->pid(), 1));
  }

  const int64_t killed = now_ns();
  service->proc().signal(SIGKILL);
  ASSERT_TRUE(service->proc().wait(5000));
  for (auto &b : blocked) {
    const std::string failed = b->expect("failed", 5000 * kTimeFactor);
    ASSERT_NE(failed, "") << b->story();
    EXPECT_LT((std::stoll(words(failed)[1]) - killed) / 1000000, 5000 * kTimeFactor) << failed;
    EXPECT_EQ(words(failed)[2], std::to_string(GF_ERR_SYSTEM)) << failed;
    EXPECT_TRUE(contains(failed, endpoint)) << failed;
    EXPECT_NE(b->expect("destroyed", 5000 * kTimeFactor), "") << b->story();
    std::optional<int> status = b->wait(5000 * kTimeFactor);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 3)
        << exit_text(status) << b->story();
  }
  const std::string run = graph.expect("run", 5000 * kTimeFactor);
  ASSERT_NE(run, "") << graph.story();
  EXPECT_LT((std::stoll(words(run)[1]) - killed) / 1000000, 5000 * kTimeFactor) << run;
  EXPECT_EQ(words(run)[2], std::to_string(GF_ERR_TASK_FAILED)) << run;
  EXPECT_TRUE(contains(run, endpoint)) << run;
  EXPECT_NE(graph.expect("destroyed", 5000 * kTimeFactor), "") << graph.story();
  EXPECT_TRUE(graph.wait(5000 * kTimeFactor)) << graph.story();

  // The dead service left its socket file; a new one replaces it and answers at once. The holder
  // still runs, so the device it held stays its own (the grants were saved): the fresh client
  // gets the other one, and device 0 comes back only when the holder ends.
  struct stat st {};
  ASSERT_EQ(::lstat((dir / "gf.sock").c_str(), &st), 0);
  service = std::make_unique<Service>(dir, 2, std::vector<std::string>{}, "serve2.log");
  ASSERT_TRUE(service->ready()) << service->log();
  Proc fresh(client("acquire", *service, {"1", "0"}), dir / "fresh.err");
  const std::string granted = fresh.expect("granted", 5000 * kTimeFactor);
  EXPECT_NE(granted, "") << fresh.story();
  EXPECT_NE(fresh.expect("destroyed", 5000 * kTimeFactor), "") << fresh.story();
  const std::string leases = json_array(status_json(dir, *service), "leases");
  EXPECT_TRUE(contains(leases, "\"pid\":" + std::to_string(holder.pid()) + ",")) << leases;
  EXPECT_TRUE(contains(leases, "\"ordinal\":0,")) << leases;
  EXPECT_TRUE(contains(service->log(), "kept: its holder (pid " + std::to_string(holder.pid())))
      << service->log();
  holder.signal(SIGKILL);
  ASSERT_TRUE(holder.wait(5000 * kTimeFactor));
  const int64_t start = now_ns();
  while (json_array(status_json(dir, *service), "leases") != "" &&
         ms_since(start) < 5000 * kTimeFactor)
    ::usleep(20000);
  expect_status_clean(dir, *service);
}

// ---- 5 ----

// A raw connection to the service.
class RawSocket {
 public:
  explicit RawSocket(const std::string &path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
  }
  ~RawSocket() { ::close(fd_); }
  bool connected() const { return connected_; }
  // Sends what it can (the service may close mid-way: that is fine).
  void send(const std::vector<uint8_t> &bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // True once the service has closed the connection (end of stream or reset) within timeout_ms;
  // what it sent before is in `received`.
  bool closed_by_peer(int timeout_ms, std::string &received) {
    const int64_t start = now_ns();
    while (ms_since(start) < timeout_ms) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return true;
      received.append(chunk, static_cast<size_t>(n));
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::vector<uint8_t> hello_frame() {
  fb::FlatBufferBuilder b;
  return gf::wire::frame_of(b, gf::wire::CreateHello(b, gf::wire::kProtocolVersion,
                                                     b.CreateString("garbage test"), 1.0, 0));
}

std::vector<uint8_t> lease_granted_frame() {
  fb::FlatBufferBuilder b;
  return gf::wire::frame_of(b, gf::wire::CreateLeaseGranted(b, 1, 1, 0, 0.0));
}

TEST_F(ServiceTest, GarbageClosesOnlyThatConnection) {
  Service service(dir, 2);
  ASSERT_TRUE(service.ready()) << service.log();
  Proc good(client("hold-call", service, {"1"}), dir / "good.err");
  const std::string held = good.expect("held", 20000 * kTimeFactor);
  ASSERT_NE(held, "") << good.story();
  const std::string lease = words(held)[1];

  std::mt19937 random(12);
  std::vector<uint8_t> noise(4096);
  for (auto &byte : noise) byte = static_cast<uint8_t>(random());
  noise[0] = 0x10;  // a plausible length, so the bytes are read as a frame and fail verification
  noise[1] = noise[2] = noise[3] = 0;
  std::vector<uint8_t> oversized = {0x01, 0x00, 0x40, 0x00};  // 4 MiB + 1
  oversized.resize(4096, 0x41);
  std::vector<uint8_t> hello_then_granted = hello_frame();
  const std::vector<uint8_t> granted = lease_granted_frame();
  hello_then_granted.insert(hello_then_granted.end(), granted.begin(), granted.end());
  std::vector<uint8_t> truncated = hello_frame();
  truncated.resize(truncated.size() / 2);
  struct Case {
    const char *what;
    std::vector<uint8_t> bytes;
    bool expect_close;  // the service closes it by itself (else: we close it after sending)
    const char *logged;
  };
  const std::vector<Case> cases = {
      {"random bytes", noise, true, "it sent a"},
      {"a frame over the size limit", oversized, true, "it sent a frame of 4194305 bytes"},
      {"LeaseGranted before Hello", granted, true, "it sent a LeaseGranted message before Hello"},
      {"LeaseGranted after Hello", hello_then_granted, true,
       "it sent a LeaseGranted message, which clients do not send"},
      {"zero-length frame", {0, 0, 0, 0}, true, "it sent a frame of length 0"},
      {"a 3-byte frame",
       {3, 0, 0, 0, 'G', 'F', 'W'},
       true,
       "it sent a frame that is not a gpuflow control message"},
      {"a truncated frame, then close", truncated, false,
       "it closed the connection in the middle of a frame"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    const size_t log_before = service.log().size();
    {
      RawSocket raw(service.socket());
      ASSERT_TRUE(raw.connected());
      raw.send(c.bytes);
      if (!c.expect_close) raw.shutdown_write();
      std::string received;
      EXPECT_TRUE(raw.closed_by_peer(5000 * kTimeFactor, received))
          << "the service kept the connection open";
    }
    // Logged with a reason; the good client's lease stands and its calls work.
    const int64_t start = now_ns();
    std::string log;
    while (ms_since(start) < 5000 * kTimeFactor) {
      log = service.log().substr(log_before);
      if (contains(log, "disconnected")) break;
      ::usleep(10000);
    }
    EXPECT_TRUE(contains(log, c.logged)) << log;
    good.write("check\n");
    EXPECT_EQ(good.expect("", 10000 * kTimeFactor), "ok") << good.story();
  }
  const std::string leases = json_array(status_json(dir, service), "leases");
  EXPECT_TRUE(contains(leases, "\"lease_id\":" + lease + ",")) << leases;
  good.close_stdin();
  EXPECT_NE(good.expect("bye", 10000 * kTimeFactor), "") << good.story();
  std::optional<int> status = good.wait(10000 * kTimeFactor);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << exit_text(status);
  expect_status_clean(dir, service);
}

// ---- 6 ----

TEST_F(ServiceTest, AnotherUserIsRefusedByTheSocket) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid (nobody)";
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  struct stat st {};
  ASSERT_EQ(::stat(service.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string endpoint = service.endpoint();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  // This process runs no threads of its own (the service is another process): a forked child
  // may call the library.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::string result;
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      result = "setuid failed";
    } else {
      gf_pool_config config = GF_POOL_CONFIG_INIT;
      config.endpoint = endpoint.c_str();
      config.cpu_workers = -1;
      gf_pool *pool = nullptr;
      gf_status s = gf_pool_create(&pool, &config);
      result = std::to_string(s) + " " + gf_last_error();
      if (pool) gf_pool_destroy(pool);
    }
    (void)!::write(pipe_fds[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string result;
  char chunk[1024];
  for (ssize_t n; (n = ::read(pipe_fds[0], chunk, sizeof chunk)) > 0;) result.append(chunk, n);
  ::close(pipe_fds[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(words(result).at(0), std::to_string(GF_ERR_SYSTEM)) << result;
  EXPECT_TRUE(contains(result, endpoint)) << result;
  EXPECT_TRUE(contains(result, std::strerror(EACCES))) << result;
  EXPECT_FALSE(contains(service.log(), "connected")) << service.log();
}

// ---- 7 ----

TEST_F(ServiceTest, FairShareSplitsDeviceTimeByWeight) {
  // A half-life far beyond the test's length: the usage the book counts is the device time
  // each client held, in device-seconds, barely decayed.
  Service service(dir, 1, {"--usage-half-life", "1000000"});
  ASSERT_TRUE(service.ready()) << service.log();
  // Each floods with 4 requests at once, leases held 20 ms; the heavy one stops after 150
  // grants, the light one when told.
  Proc light(client("flood", service, {dir / "light", "4", "1000", "20", "1"}), dir / "light.err",
             {"GPUFLOW_CLIENT_WEIGHT=1"});
  Proc heavy(client("flood", service, {dir / "heavy", "4", "150", "20", "1"}), dir / "heavy.err",
             {"GPUFLOW_CLIENT_WEIGHT=3"});
  ASSERT_NE(light.expect("connected", 20000 * kTimeFactor), "") << light.story();
  ASSERT_NE(heavy.expect("connected", 20000 * kTimeFactor), "") << heavy.story();
  const std::string clients = json_array(status_json(dir, service), "clients");
  EXPECT_TRUE(contains(clients, "\"weight\":3,")) << clients;
  light.write("go\n");
  heavy.write("go\n");
  ASSERT_NE(light.expect("started", 20000 * kTimeFactor), "") << light.story();
  ASSERT_NE(heavy.expect("started", 20000 * kTimeFactor), "") << heavy.story();
  // The book's own account, sampled while both clients wanted the device (each held its lease
  // or had a request queued), until the heavy one stopped asking.
  struct Usage {
    double light = 0, heavy = 0;
  };
  std::vector<Usage> while_both_asked;
  const int64_t deadline = now_ns() + int64_t{60000} * kTimeFactor * 1000000;
  for (bool heavy_asks = true; heavy_asks && now_ns() < deadline;) {
    const nlohmann::json status = nlohmann::json::parse(status_json(dir, service));
    Usage usage;
    bool light_asks = false;
    heavy_asks = false;
    for (const nlohmann::json &c : status.at("clients")) {
      const bool asks = c.at("leases").get<int>() + c.at("queued").get<int>() > 0;
      const pid_t pid = c.at("pid").get<pid_t>();
      if (pid == heavy.pid()) {
        heavy_asks = asks;
        usage.heavy = c.at("usage").get<double>();
      } else if (pid == light.pid()) {
        light_asks = asks;
        usage.light = c.at("usage").get<double>();
      }
    }
    if (heavy_asks && light_asks) while_both_asked.push_back(usage);
  }
  EXPECT_NE(heavy.expect("done", 60000 * kTimeFactor), "") << heavy.story();
  light.close_stdin();
  EXPECT_NE(light.expect("done", 20000 * kTimeFactor), "") << light.story();
  for (Proc *p : {&light, &heavy}) {
    std::optional<int> status = p->wait(10000 * kTimeFactor);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << exit_text(status);
  }
  const std::vector<Interval> l = read_records(dir / "light"), h = read_records(dir / "heavy");
  ASSERT_FALSE(l.empty());
  ASSERT_GE(h.size(), 150u);  // each thread checks the count before it asks
  ASSERT_GE(while_both_asked.size(), 2u) << "the status never showed both clients asking";
  const Usage &first = while_both_asked.front(), &last = while_both_asked.back();
  const double light_s = last.light - first.light, heavy_s = last.heavy - first.heavy;
  // The window must span many grants, or one lease more or less would swing the ratio.
  ASSERT_GT(light_s + heavy_s, 1.0) << "the window held only " << light_s + heavy_s << " s";
  ASSERT_GT(light_s, 0);
  const double ratio = heavy_s / light_s;
  std::printf("usage while both asked: heavy %.3f, light %.3f device-s, ratio %.3f\n", heavy_s,
              light_s, ratio);
  EXPECT_GT(ratio, 3 * 0.9) << "heavy " << heavy_s << ", light " << light_s << " device-s";
  EXPECT_LT(ratio, 3 * 1.1) << "heavy " << heavy_s << ", light " << light_s << " device-s";
  check_no_overcommit([&] {
    std::vector<Interval> all = l;
    all.insert(all.end(), h.begin(), h.end());
    return all;
  }());
  expect_status_clean(dir, service);
}

// ---- 8 ----

TEST_F(ServiceTest, FourDeviceRequestIsNotStarvedBySingleDeviceOnes) {
  Service service(dir, 4);
  ASSERT_TRUE(service.ready()) << service.log();
  // Three clients keep 9 single-device requests outstanding, leases held 20 ms. Their grants
  // (about a minute's worth per unit of the time factor) outlast the big request's wait of 30 s
  // per unit, so a starved request fails by its deadline; the test stops them once it is granted.
  const std::string grants = std::to_string(5000 * kTimeFactor);
  std::vector<std::unique_ptr<Proc>> flooders;
  for (int i = 0; i < 3; ++i) {
    flooders.push_back(std::make_unique<Proc>(
        client("flood", service, {dir / ("flood" + std::to_string(i)), "3", grants, "20", "1"}),
        dir / ("flood" + std::to_string(i) + ".err")));
    ASSERT_NE(flooders.back()->expect("connected", 20000 * kTimeFactor), "");
    flooders.back()->write("go\n");
  }
  for (auto &f : flooders) ASSERT_NE(f->expect("started", 20000 * kTimeFactor), "") << f->story();
  Proc big(client("acquire", service, {"4", std::to_string(20000 * kTimeFactor)}), dir / "big.err");
  const std::string request = big.expect("request", 20000 * kTimeFactor);
  const std::string granted = big.expect("granted", 30000 * kTimeFactor);
  EXPECT_NE(granted, "") << big.story();
  EXPECT_NE(big.expect("destroyed", 10000 * kTimeFactor), "") << big.story();
  // The flood goes on after the big lease (a flooder holds a lease again), then stops.
  const int64_t deadline = now_ns() + int64_t{20000} * kTimeFactor * 1000000;
  bool flood_holds = false;
  while (!flood_holds && now_ns() < deadline) {
    const nlohmann::json status = nlohmann::json::parse(status_json(dir, service));
    for (const nlohmann::json &c : status.at("clients")) {
      if (c.at("pid").get<pid_t>() != big.pid() && c.at("leases").get<int>() > 0)
        flood_holds = true;
    }
  }
  EXPECT_TRUE(flood_holds) << "no flooder held a lease after the 4-device one";
  for (auto &f : flooders) f->close_stdin();
  std::vector<Interval> floods;
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(flooders[i]->expect("done", 20000 * kTimeFactor), "") << flooders[i]->story();
    std::optional<int> status = flooders[i]->wait(10000 * kTimeFactor);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << exit_text(status);
    std::vector<Interval> r = read_records(dir / ("flood" + std::to_string(i)));
    floods.insert(floods.end(), r.begin(), r.end());
  }
  ASSERT_NE(granted, "");
  const int64_t asked = std::stoll(words(request)[1]), got = std::stoll(words(granted)[1]);
  // Single-device leases were granted before the big request and after its lease: they kept
  // coming the whole time, and it was not starved by them.
  EXPECT_TRUE(std::any_of(floods.begin(), floods.end(), [&](auto &i) { return i.start < asked; }));
  EXPECT_TRUE(std::any_of(floods.begin(), floods.end(), [&](auto &i) { return i.start > got; }));
  for (const Interval &i : floods) {
    EXPECT_FALSE(i.start < got && got < i.end) << describe(i) << " was held when all 4 devices "
                                               << "were granted at " << got;
  }
  expect_status_clean(dir, service);
}

// ---- 9 ----

TEST_F(ServiceTest, SigtermStopsTheServiceCleanly) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  const std::string endpoint = service.endpoint();
  Proc holder(client("hold-call", service, {"1"}), dir / "holder.err");
  ASSERT_NE(holder.expect("held", 20000 * kTimeFactor), "") << holder.story();
  Proc waiter(client("acquire", service, {"1", "-1"}), dir / "waiter.err");
  ASSERT_NE(waiter.expect("connected", 20000 * kTimeFactor), "");
  ASSERT_TRUE(wait_queued(dir, service, waiter.pid(), 1));

  const int64_t stopped = now_ns();
  service.proc().signal(SIGTERM);
  std::optional<int> status = service.proc().wait(5000 * kTimeFactor);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << exit_text(status) << "\n"
      << service.log();
  struct stat st {};
  EXPECT_NE(::lstat(service.socket().c_str(), &st), 0) << "the socket file is still there";
  const std::string failed = waiter.expect("failed", 5000 * kTimeFactor);
  ASSERT_NE(failed, "") << waiter.story();
  EXPECT_LT((std::stoll(words(failed)[1]) - stopped) / 1000000, 5000 * kTimeFactor);
  EXPECT_TRUE(contains(failed, endpoint)) << failed;
  EXPECT_NE(waiter.expect("destroyed", 5000 * kTimeFactor), "") << waiter.story();
  holder.write("check\n");
  const std::string answer = holder.expect("", 10000 * kTimeFactor);
  EXPECT_TRUE(answer.rfind("fail ", 0) == 0) << answer;
  EXPECT_TRUE(contains(answer, endpoint)) << answer;
  holder.close_stdin();
  EXPECT_NE(holder.expect("bye", 10000 * kTimeFactor), "") << holder.story();
  EXPECT_TRUE(holder.wait(10000 * kTimeFactor));
}

}  // namespace
