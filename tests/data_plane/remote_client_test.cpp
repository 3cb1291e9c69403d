// Remote clients (issue 13, item 5): a real `gpuflow serve --listen HOST:PORT --insecure-listen
// --token-file F` and clients that reach it over plain TCP (TLS: tls_test.cpp): blobs from 0 B to
// 256 MiB through the gpuflow-relay child, the seed graph run in the service from `gpuflow run
// --pool tcp://…`, wrong tokens and garbage refused, a relay or a client killed mid-transfer (the
// service and its other clients carry on, nothing is left behind), and a client on another "host":
// a network namespace joined to the service's by a veth pair, made here (skipped, saying why, where
// namespaces cannot be made).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "pattern.hpp"
#include "processes.hpp"
#include "test_support.hpp"
#include "wire/framing.hpp"

using namespace gfsvc;
using namespace gft;

namespace {

const std::string kSeedKernels = SEED_KERNELS_PATH;
const std::string kSeedGraph = SEED_GRAPH_PATH;

// The pids of `parent`'s children running `program` (by /proc/PID/stat's comm, at most 15 bytes).
std::vector<pid_t> children_named(pid_t parent, const std::string &program) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = stat.substr(open + 1, close - open - 1);
    std::vector<std::string> rest = words(stat.substr(close + 1));
    if (rest.size() < 2 || comm != program.substr(0, 15)) continue;
    if (std::stoi(rest[1]) == parent) out.push_back(std::stoi(name));
  }
  return out;
}

bool wait_for(const std::function<bool()> &done, int ms) {
  const int64_t start = now_ns();
  while (!done()) {
    if (ms_since(start) > ms * kTimeFactor) return false;
    ::usleep(20000);
  }
  return true;
}

// A service on a unix socket that also listens on TCP for remote clients.
class RemoteService {
 public:
  RemoteService(const TempDir &dir, const std::string &host = "127.0.0.1")
      : token_file_(dir / "token"),
        service_(dir, 2,
                 {"--listen", host + ":0", "--insecure-listen", "--token-file", dir / "token",
                  "--plugin", kSeedKernels}) {
    if (!service_.ready()) return;
    const std::string line =
        service_.proc().expect("gpuflow serve: remote clients connect to", 10000 * kTimeFactor);
    const size_t at = line.find("tcp+insecure://");
    if (at != std::string::npos) endpoint_ = line.substr(at, line.find(' ', at) - at);
  }
  bool ready() const { return !endpoint_.empty(); }
  const std::string &endpoint() const { return endpoint_; }
  const std::string &token_file() const { return token_file_; }
  Service &service() { return service_; }
  std::string log() const { return service_.log(); }
  pid_t pid() { return service_.proc().pid(); }
  std::shared_ptr<gf::client::Connection> connect(const std::string &name) {
    return gf::client::Connection::open(endpoint_, name, 1, 5000, 0, token_file_);
  }

 private:
  std::string token_file_;
  Service service_;
  std::string endpoint_;
};

class RemoteClientTest : public ::testing::Test {
 protected:
  TempDir dir;
};

TEST_F(RemoteClientTest, RoundTripsFromZeroBytesTo256MiBThroughTheRelay) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  auto c = remote.connect("remote_client_test");
  ASSERT_TRUE(c->welcome().data_plane);
  uint64_t blob = 1;
  for (size_t size : {size_t{0}, size_t{1}, size_t{64} << 10, size_t{1} << 20, size_t{16} << 20,
                      size_t{256} << 20}) {
    const std::vector<uint8_t> bytes = pattern(size, size + 3);
    c->blobs().put(blob, bytes.data(), bytes.size());
    EXPECT_EQ(first_difference(bytes, c->blobs().get(blob)), "") << size << " bytes";
    c->blobs().drop_blob(blob++);
  }
  // The client's side of the data plane is UCX's TCP; the service reports the relayed path.
  EXPECT_TRUE(contains(c->blobs().data_plane_transports(), "tcp"))
      << c->blobs().data_plane_transports();
  EXPECT_TRUE(contains(remote.log(), "has a data plane (tcp (relayed))")) << remote.log();
  EXPECT_EQ(children_named(remote.pid(), "gpuflow-relay").size(), 1u);
  // The status shows the remote client as who it says it is, at its address.
  auto [rc, json] = run_cli(dir, {"status", "--json", "--pool", remote.service().endpoint()});
  EXPECT_EQ(rc, 0) << json;
  EXPECT_TRUE(contains(json, "@127.0.0.1:")) << json;
  // The service's own process holds TCP sockets for the listener and the control connection
  // only: UCX's TCP lives in the relay.
  std::set<std::string> ports;
  const std::set<std::string> mine = socket_inodes_of(remote.pid());
  for (const char *table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream tcp(table);
    std::string line;
    std::getline(tcp, line);
    while (std::getline(tcp, line)) {
      std::vector<std::string> w = words(line);
      if (w.size() >= 10 && mine.count(w[9])) ports.insert(w[1].substr(w[1].rfind(':') + 1));
    }
  }
  const std::string port = remote.endpoint().substr(remote.endpoint().rfind(':') + 1);
  char hex[8];
  std::snprintf(hex, sizeof hex, "%04X", std::stoi(port));
  EXPECT_EQ(ports, std::set<std::string>{hex}) << "the service's own TCP sockets";
  // Letting go ends the relay and frees the blobs.
  c.reset();
  EXPECT_TRUE(wait_for([&] { return children_named(remote.pid(), "gpuflow-relay").empty(); }, 5000))
      << remote.log();
  EXPECT_TRUE(wait_for([&] { return contains(remote.log(), "data plane closed"); }, 5000));
}

TEST_F(RemoteClientTest, TheSeedGraphRunsInTheServiceFromGpuflowRun) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  auto [rc, out] = run_cli(dir, {"run", "--pool", remote.endpoint(), "--token-file",
                                 remote.token_file(), "--show-outputs", kSeedGraph});
  EXPECT_EQ(rc, 0) << out << remote.log();
  EXPECT_TRUE(contains(out, "running in the service at " + remote.endpoint())) << out;
  EXPECT_TRUE(contains(out, "32 tasks: 32 succeeded, 0 failed")) << out;
  // The same graph in this process gives the same outputs.
  auto [local_rc, local] =
      run_cli(dir, {"run", "--pool", "embedded", "--plugin", kSeedKernels, "--show-outputs",
                    "--backend", "host", "--emulated-devices", "2", kSeedGraph});
  EXPECT_EQ(local_rc, 0) << local;
  auto outputs = [](const std::string &text) {
    std::string kept;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
      if (contains(l, " bytes, ")) kept += l + "\n";
    return kept;
  };
  EXPECT_NE(outputs(out), "") << out;
  EXPECT_EQ(outputs(out), outputs(local));
  // The graph's leases were the remote client's.
  EXPECT_TRUE(contains(remote.log(), "@127.0.0.1:")) << remote.log();
}

// A remote service's devices are on its host: a graph of commands that need GPUs runs there,
// and this process, which has none of them, refuses to run it here.
TEST_F(RemoteClientTest, GraphsThatNeedTheNodesDevicesRunThere) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  const std::string pipeline = std::string(SOURCE_DIR) + "/examples/json/gpu_pipeline.json";
  auto [rc, out] = run_cli(dir, {"run", "--pool", remote.endpoint(), "--token-file",
                                 remote.token_file(), "--no-progress", pipeline});
  EXPECT_EQ(rc, 0) << out << remote.log();
  EXPECT_TRUE(contains(out, "running in the service at " + remote.endpoint())) << out;
  EXPECT_TRUE(contains(out, "8 tasks: 8 succeeded, 0 failed")) << out;
  EXPECT_TRUE(contains(remote.log(), "granted to client")) << remote.log();
  auto [here_rc, here] = run_cli(dir, {"run", "--pool", remote.endpoint(), "--token-file",
                                       remote.token_file(), "--in-process", pipeline});
  EXPECT_NE(here_rc, 0) << here;
  EXPECT_TRUE(contains(here, "train-0")) << here;  // the first task that needs a GPU, named
  // And `gpuflow lease`, whose command would run here, says why it will not.
  auto [lease_rc, lease] = run_cli(dir, {"lease", "--pool", remote.endpoint(), "--token-file",
                                         remote.token_file(), "--", "true"});
  EXPECT_EQ(lease_rc, 2) << lease;
  EXPECT_TRUE(contains(lease, "another host")) << lease;
}

// A graph with a C callback of this process and a command that needs a GPU, on a pool connected
// to a remote service: split, the callback here (on this host's CPU), the command there.
TEST_F(RemoteClientTest, ASplitGraphSendsItsDeviceTasksToTheRemoteNode) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  const std::string endpoint = remote.endpoint();
  config.endpoint = endpoint.c_str();
  config.token_file = remote.token_file().c_str();
  config.cpu_workers = 1;
  Pool pool = make_pool(config);
  ASSERT_TRUE(pool) << last_error();
  uint32_t devices = 99;
  GF_EXPECT_OK(gf_pool_device_count(&devices, pool.get()));
  EXPECT_EQ(devices, 0u) << "the service's devices are on its host";
  Graph graph = make_graph();
  const std::string mark = dir / "mark", used = dir / "used";
  TaskSpec here;
  here.name = "mark";
  here.cpu = [mark](gf_task_ctx *) { return std::ofstream(mark) << "x" ? 0 : 1; };
  const gf_task first = must_add_task(graph.get(), here);
  const std::string script = "test -f " + mark + " && touch " + used;
  const char *argv[] = {"sh", "-c", script.c_str()};
  gf_command_desc command = GF_COMMAND_DESC_INIT;
  command.argv = argv;
  command.argc = 3;
  gf_resource gpu{"GPU", 1};
  gf_task_desc there = GF_TASK_DESC_INIT;
  there.name = "use";
  there.command = &command;
  there.resources = &gpu;
  there.resource_count = 1;
  there.after = &first;
  there.after_count = 1;
  gf_task second{0};
  GF_ASSERT_OK(gf_graph_add_task(&second, graph.get(), &there));
  gf_run *run = submit(pool.get(), graph.get());
  ASSERT_NE(run, nullptr) << last_error();
  gf_run_where where = GF_RUN_ANYWHERE;
  GF_EXPECT_OK(gf_run_where_get(&where, run));
  EXPECT_EQ(where, GF_RUN_SPLIT);
  EXPECT_EQ(gf_run_wait(run, 30000 * kTimeFactor), GF_OK) << last_error() << remote.log();
  gf_run_destroy(run);
  EXPECT_TRUE(std::filesystem::exists(used)) << remote.log();
}

TEST_F(RemoteClientTest, DoctorChecksTheRemoteDataPlane) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  auto [rc, out] = run_cli(dir, {"doctor", "--pool", remote.endpoint(), "--token-file",
                                 remote.token_file(), "--seconds", "0.5"});
  EXPECT_FALSE(contains(out, "FAIL")) << out;
  (void)rc;  // doctor's own status also counts CUDA and MPS, which this machine may lack
  EXPECT_TRUE(contains(out, "ok   the service answers")) << out;
  EXPECT_TRUE(contains(out, "ok   data plane to the service: tcp/lo")) << out;
  EXPECT_TRUE(contains(out, "1 MiB blobs, content checked")) << out;
  EXPECT_FALSE(contains(out, "FAIL data plane")) << out;
}

TEST_F(RemoteClientTest, WrongTokensAndGarbageAreRefusedWithoutHarm) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  { std::ofstream(dir / "wrong") << "not-the-token-at-all\n"; }
  try {
    gf::client::Connection::open(remote.endpoint(), "intruder", 1, 5000, 0, dir / "wrong");
    ADD_FAILURE() << "a wrong token was let in";
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "wrong token")) << e.what();
  }
  ::unsetenv("GPUFLOW_TOKEN_FILE");
  try {
    gf::client::Connection::open(remote.endpoint(), "tokenless", 1);
    ADD_FAILURE() << "a tcp:// endpoint opened with no token";
  } catch (const gf::Error &e) {
    EXPECT_TRUE(contains(e.what(), "GPUFLOW_TOKEN_FILE")) << e.what();
  }
  // Raw bytes on the TCP port: a frame too long, a Hello-less request, and a 1 MiB frame (which
  // a token holder may send) begun before any Hello.
  const int port = std::stoi(remote.endpoint().substr(remote.endpoint().rfind(':') + 1));
  auto tcp_connect = [&] {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    return fd;
  };
  std::string big_frame("\x00\x00\x10\x00", 4);
  big_frame += std::string(20000, 'x');
  for (const std::string &garbage : {std::string("\xff\xff\xff\x7fGET / HTTP/1.1\r\n\r\n", 22),
                                     std::string(64, '\0'), big_frame}) {
    const int fd = tcp_connect();
    ASSERT_EQ(::write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
    char sink[4096];
    while (::read(fd, sink, sizeof sink) > 0) {
    }  // the service closes it
    ::close(fd);
  }
  EXPECT_TRUE(contains(remote.log(), "refused: wrong token")) << remote.log();
  EXPECT_TRUE(wait_for([&] { return contains(remote.log(), "bytes before its Hello"); }, 5000))
      << remote.log();
  // Connections that never say Hello: 64 may wait; the 65th is closed at once, and once they
  // go, a client with the token gets in again.
  std::vector<int> silent;
  for (int i = 0; i < 64; ++i) silent.push_back(tcp_connect());
  ASSERT_TRUE(wait_for(
      [&] {
        return contains(remote.log(), "already wait for their Hello") ||
               (::close(tcp_connect()), false);
      },
      5000))
      << remote.log();
  int extra = tcp_connect();
  char sink[16];
  EXPECT_EQ(::read(extra, sink, sizeof sink), 0) << "the 65th silent connection was kept";
  ::close(extra);
  for (int fd : silent) ::close(fd);
  // Nobody got in, nothing was spawned, and a client with the token is served as before (once
  // the service has seen the silent ones go: until then a new connection is still one too many).
  EXPECT_TRUE(children_named(remote.pid(), "gpuflow-relay").empty());
  std::shared_ptr<gf::client::Connection> c;
  EXPECT_TRUE(wait_for(
      [&] {
        try {
          c = remote.connect("good");
        } catch (const gf::Error &) {
        }
        return c != nullptr;
      },
      5000))
      << remote.log();
  ASSERT_NE(c, nullptr);
  const std::vector<uint8_t> bytes = pattern(1000, 1);
  c->blobs().put(1, bytes.data(), bytes.size());
  EXPECT_EQ(c->blobs().get(1), bytes);
}

TEST_F(RemoteClientTest, TheTokenFileIsMadePrivateAndAReadableOneIsRefused) {
  {
    RemoteService remote(dir);
    ASSERT_TRUE(remote.ready()) << remote.log();
    struct stat st {};
    ASSERT_EQ(::stat(remote.token_file().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    std::ifstream in(remote.token_file());
    std::string token;
    std::getline(in, token);
    EXPECT_EQ(token.size(), 64u);  // 256 random bits, as hex
  }
  ASSERT_EQ(::chmod((dir / "token").c_str(), 0644), 0);
  auto [rc, out] = run_cli(dir, {"serve", "--socket", dir / "other.sock", "--listen", "127.0.0.1:0",
                                 "--token-file", dir / "token"});
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(contains(out, "readable by no one else")) << out;
}

// A relay that fails to start, talks nonsense, or never answers: the remote client's data plane
// is refused saying why (within 10 s), the relay is not left behind, the service carries on.
TEST_F(RemoteClientTest, ARelayThatCannotServeIsRefusedNamingWhy) {
  const std::string sleeper = dir / "sleeping-relay", babbler = dir / "babbling-relay";
  std::ofstream(sleeper) << "#!/bin/sh\nexec sleep 60\n";
  std::ofstream(babbler) << "#!/bin/sh\necho not-hex also-not-hex\nexec sleep 60\n";
  ::chmod(sleeper.c_str(), 0755);
  ::chmod(babbler.c_str(), 0755);
  struct Case {
    std::string relay, expected;
  };
  for (const Case &k :
       {Case{"/bin/false", "ended (exit status 1)"}, Case{babbler, "did not give its addresses"},
        Case{sleeper, "gave no addresses within 10 s"}}) {
    ::setenv("GPUFLOW_RELAY", k.relay.c_str(), 1);
    TempDir own;
    RemoteService remote(own);
    ::unsetenv("GPUFLOW_RELAY");
    ASSERT_TRUE(remote.ready()) << remote.log();
    auto c = remote.connect("unlucky");
    try {
      c->blobs().open_data_plane();
      ADD_FAILURE() << k.relay << ": a data plane opened";
    } catch (const gf::Error &e) {
      EXPECT_TRUE(contains(e.what(), k.expected)) << k.relay << ": " << e.what();
    }
    if (k.relay == "/bin/false") {
      // Asked again, the service tries again (not "you already have a data plane").
      try {
        c->blobs().open_data_plane();
        ADD_FAILURE() << "a data plane opened through /bin/false";
      } catch (const gf::Error &e) {
        EXPECT_TRUE(contains(e.what(), k.expected)) << "again: " << e.what();
      }
    }
    EXPECT_TRUE(wait_for(
        [&] {
          return children_named(remote.pid(), "sleep").empty() &&
                 children_named(remote.pid(), "false").empty();
        },
        5000))
        << k.relay;
    EXPECT_NO_THROW(c->leases().status()) << k.relay;
  }
}

TEST_F(RemoteClientTest, AKilledRelayFailsItsClientsTransfersNamingIt) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  auto c = remote.connect("victim");
  const std::vector<uint8_t> bytes = pattern(4 << 20, 5);
  c->blobs().put(1, bytes.data(), bytes.size());
  std::vector<pid_t> relays = children_named(remote.pid(), "gpuflow-relay");
  ASSERT_EQ(relays.size(), 1u);
  ::kill(relays[0], SIGKILL);
  ASSERT_TRUE(wait_for([&] { return contains(remote.log(), "relay (pid"); }, 5000)) << remote.log();
  EXPECT_TRUE(contains(remote.log(), "killed by signal 9")) << remote.log();
  try {
    c->blobs().get(1);
    ADD_FAILURE() << "a get went through a dead relay";
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_SYSTEM);
    std::printf("a get through a dead relay: %s\n", e.what());
    EXPECT_TRUE(contains(e.what(), "relay (pid " + std::to_string(relays[0]) + ") ended"))
        << e.what();
  }
  // Its control connection, the service and other remote clients carry on.
  EXPECT_NO_THROW(c->leases().status());
  auto other = remote.connect("bystander");
  other->blobs().put(1, bytes.data(), bytes.size());
  EXPECT_EQ(first_difference(other->blobs().get(1), bytes), "");
  // And the client gets a new data plane (a new relay) once it knows its old one failed: a put
  // that finds out fails saying why, and the next goes through.
  std::string failures;
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      c->blobs().put(2, bytes.data(), bytes.size());
      break;
    } catch (const gf::Error &e) {
      failures += std::string(e.what()) + "\n";
    }
  }
  EXPECT_EQ(first_difference(c->blobs().get(2), bytes), "") << failures << remote.log();
  EXPECT_LE(std::count(failures.begin(), failures.end(), '\n'), 1) << failures;
  const std::vector<pid_t> now = children_named(remote.pid(), "gpuflow-relay");
  EXPECT_EQ(now.size(), 2u) << "the bystander's relay and the new one";
  EXPECT_EQ(std::count(now.begin(), now.end(), relays[0]), 0);
}

// A remote client's bytes reach the service's worker only through its relay, which knows the
// client's id: bytes under another client's tag end the relay (naming the tag), not the other
// client's put, and the other client carries on.
TEST_F(RemoteClientTest, BytesUnderAnotherClientsTagEndOnlyTheSendersRelay) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  auto victim = remote.connect("victim");
  auto sender = remote.connect("sender");
  const std::vector<uint8_t> bytes = pattern(4096, 5);
  victim->blobs().put(1, bytes.data(), bytes.size());
  gf::client::BlobClient::PutTicket ticket = sender->blobs().announce_put(1, bytes.size());
  ticket.tag = (uint64_t{victim->welcome().client_id} << 32) | 77;
  EXPECT_THROW(sender->blobs().finish_put(ticket, bytes.data()), gf::Error);
  EXPECT_TRUE(wait_for([&] { return contains(remote.log(), "outside its tag space"); }, 5000))
      << remote.log();
  EXPECT_EQ(first_difference(victim->blobs().get(1), bytes), "");
  victim->blobs().put(2, bytes.data(), bytes.size());
  EXPECT_EQ(first_difference(victim->blobs().get(2), bytes), "");
}

TEST_F(RemoteClientTest, AClientKilledMidTransferLeavesNothingBehind) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  Proc client({BLOB_CLIENT_PATH, remote.endpoint(), "loop", std::to_string(32 << 20)},
              dir / "client.err", {"GPUFLOW_TOKEN_FILE=" + remote.token_file()});
  ASSERT_NE(client.expect("put 2", 30000 * kTimeFactor), "") << client.story();
  client.signal(SIGKILL);
  client.wait(5000);
  EXPECT_TRUE(
      wait_for([&] { return children_named(remote.pid(), "gpuflow-relay").empty(); }, 10000))
      << remote.log();
  EXPECT_TRUE(wait_for([&] { return contains(remote.log(), "blob byte(s) freed"); }, 5000))
      << remote.log();
  auto [rc, json] = run_cli(dir, {"status", "--json", "--pool", remote.service().endpoint()});
  EXPECT_TRUE(contains(json, "\"blob_bytes\":0")) << json;
  auto c = remote.connect("after");
  const std::vector<uint8_t> bytes = pattern(1 << 20, 9);
  c->blobs().put(1, bytes.data(), bytes.size());
  EXPECT_EQ(first_difference(c->blobs().get(1), bytes), "");
}

// A remote client whose graph holds a device when the client is killed: the service hears the
// TCP connection close, cancels the run (its command is killed), and the lease taken in the
// client's name goes back, so the node's devices are all free for the next client.
TEST_F(RemoteClientTest, AKilledClientsRunningGraphGivesItsLeaseBack) {
  RemoteService remote(dir);
  ASSERT_TRUE(remote.ready()) << remote.log();
  const std::string pid_file = dir / "held.pid", graph = dir / "hold.json";
  std::ofstream(graph) << R"({"format_version": 1, "tasks": [{"name": "hold", "command": {"argv":
      ["sh", "-c", "echo $$ > )"
                       << pid_file << R"(.tmp && mv )" << pid_file << R"(.tmp )" << pid_file
                       << R"( && exec sleep 120"], "timeout_s": 300},
      "resources": [{"name": "GPU", "amount": 1}]}]})";
  Proc client({GPUFLOW_CLI_PATH, "run", "--pool", remote.endpoint(), "--token-file",
               remote.token_file(), "--no-progress", graph},
              dir / "hold.err");
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(pid_file); }, 30000 * kTimeFactor))
      << client.story() << remote.log();
  pid_t held = 0;
  std::ifstream(pid_file) >> held;
  ASSERT_GT(held, 0);
  auto leases = [&] {
    auto [rc, json] = run_cli(dir, {"status", "--json", "--pool", remote.service().endpoint()});
    return json.substr(json.find("\"leases\":["), 11);
  };
  EXPECT_EQ(leases(), "\"leases\":[{") << "the running command holds a GPU";
  client.signal(SIGKILL);
  client.wait(5000);
  EXPECT_TRUE(wait_for([&] { return leases() == "\"leases\":[]"; }, 10000 * kTimeFactor))
      << remote.log();
  EXPECT_TRUE(wait_for(
      [&] {
        std::ifstream stat("/proc/" + std::to_string(held) + "/stat");
        std::string pid, comm, state;
        return !(stat >> pid >> comm >> state) || state == "Z";
      },
      10000 * kTimeFactor))
      << "the killed client's command still runs" << remote.log();
  // Both devices are free again: the pipeline's two GPU jobs at a time run at once.
  const std::string pipeline = std::string(SOURCE_DIR) + "/examples/json/gpu_pipeline.json";
  auto [rc, out] = run_cli(dir, {"run", "--pool", remote.endpoint(), "--token-file",
                                 remote.token_file(), "--no-progress", pipeline});
  EXPECT_EQ(rc, 0) << out << remote.log();
  EXPECT_TRUE(contains(out, "8 tasks: 8 succeeded, 0 failed")) << out;
}

// ---- Another host: two network namespaces joined by a veth pair ----

// Runs a shell command; its exit status.
int sh(const std::string &command) {
  return std::system((command + " >/dev/null 2>&1").c_str());
}

class Namespaces {
 public:
  Namespaces() {
    const std::string tag = std::to_string(::getpid() % 100000);
    service_ns_ = "gfsvc" + tag;
    client_ns_ = "gfcli" + tag;
    veth_a_ = "gfa" + tag;
    const std::string &veth_a = veth_a_, veth_b = "gfb" + tag;
    if (::geteuid() != 0) {
      why_not_ = "network namespaces need root";
      return;
    }
    // What an earlier run killed mid-test (same pid number) left behind.
    sh("ip netns del " + service_ns_);
    sh("ip netns del " + client_ns_);
    sh("ip link del " + veth_a);
    if (sh("ip netns add " + service_ns_) != 0) {
      why_not_ = "`ip netns add` failed (no iproute2, or no CAP_SYS_ADMIN here)";
      return;
    }
    made_ = true;
    if (sh("ip netns add " + client_ns_) != 0 ||
        sh("ip link add " + veth_a + " type veth peer name " + veth_b) != 0 ||
        sh("ip link set " + veth_a + " netns " + service_ns_) != 0 ||
        sh("ip link set " + veth_b + " netns " + client_ns_) != 0 ||
        sh("ip -n " + service_ns_ + " addr add 10.213.0.1/24 dev " + veth_a) != 0 ||
        sh("ip -n " + client_ns_ + " addr add 10.213.0.2/24 dev " + veth_b) != 0 ||
        sh("ip -n " + service_ns_ + " link set " + veth_a + " up") != 0 ||
        sh("ip -n " + client_ns_ + " link set " + veth_b + " up") != 0 ||
        sh("ip -n " + service_ns_ + " link set lo up") != 0 ||
        sh("ip -n " + client_ns_ + " link set lo up") != 0) {
      broken_ = "could not join the namespaces with a veth pair";
    }
  }
  ~Namespaces() {
    if (!made_) return;
    sh("ip netns del " + service_ns_);  // takes the veth pair with it, once moved
    sh("ip netns del " + client_ns_);
    sh("ip link del " + veth_a_);  // in case it was never moved
  }
  // Namespaces were made but could not be wired up: a failure, not a skip.
  const std::string &broken() const { return broken_; }
  const std::string &why_not() const { return why_not_; }
  std::vector<std::string> in_service(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", service_ns_});
    return argv;
  }
  std::vector<std::string> in_client(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", client_ns_});
    return argv;
  }

 private:
  std::string service_ns_, client_ns_, veth_a_, why_not_, broken_;
  bool made_ = false;
};

std::string ip_path() {
  for (const char *p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "ip";
}

TEST_F(RemoteClientTest, AClientInAnotherNetworkNamespace) {
  Namespaces hosts;
  if (!hosts.why_not().empty()) GTEST_SKIP() << hosts.why_not();
  ASSERT_EQ(hosts.broken(), "");
  std::vector<std::string> serve = hosts.in_service(
      {GPUFLOW_CLI_PATH, "serve", "--backend", "host", "--emulated-devices", "2", "--cpu-workers",
       "2", "--socket", dir / "ns.sock", "--listen", "10.213.0.1:0", "--insecure-listen",
       "--token-file", dir / "token", "--plugin", kSeedKernels});
  serve[0] = ip_path();
  Proc service(serve, dir / "ns-serve.log");
  const std::string line =
      service.expect("gpuflow serve: remote clients connect to", 20000 * kTimeFactor);
  ASSERT_NE(line, "") << service.story();
  const size_t at = line.find("tcp+insecure://");
  const std::string endpoint = line.substr(at, line.find(' ', at) - at);
  EXPECT_EQ(endpoint.rfind("tcp+insecure://10.213.0.1:", 0), 0u) << endpoint;
  // Blobs, content checked, from the other namespace.
  std::vector<std::string> put =
      hosts.in_client({BLOB_CLIENT_PATH, endpoint, "roundtrip", std::to_string(size_t{16} << 20)});
  put[0] = ip_path();
  Proc client(put, dir / "ns-client.err", {"GPUFLOW_TOKEN_FILE=" + (dir / "token")});
  EXPECT_EQ(client.expect("ok", 30000 * kTimeFactor), "ok")
      << client.story() << service.stderr_text();
  EXPECT_EQ(client.wait(10000), std::optional<int>(0));
  // The seed graph, run in the service by `gpuflow run` from the other namespace.
  std::vector<std::string> run = hosts.in_client(
      {GPUFLOW_CLI_PATH, "run", "--pool", endpoint, "--token-file", dir / "token", kSeedGraph});
  run[0] = ip_path();
  Proc graph(run, dir / "ns-run.err");
  EXPECT_NE(graph.expect("32 tasks: 32 succeeded", 30000 * kTimeFactor), "")
      << graph.story() << service.stderr_text();
  EXPECT_EQ(graph.wait(10000), std::optional<int>(0));
  const std::string log = service.stderr_text();
  EXPECT_TRUE(contains(log, "@10.213.0.2:")) << log;  // the client came from the other side
  EXPECT_TRUE(contains(log, "has a data plane (tcp (relayed))")) << log;
  service.signal(SIGTERM);
  EXPECT_EQ(service.wait(10000), std::optional<int>(0)) << log;
}

}  // namespace
