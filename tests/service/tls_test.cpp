// TLS for remote clients: a real `gpuflow serve --listen … --tls-cert … --tls-key …` and
// clients that verify it against a site CA made here with the openssl command (the lines
// docs/service.md gives), keys only in the test's temporary directory. Certificates that are
// expired, of another CA, for another name or self-signed are refused, named; a plain-TCP client
// and a handshake that stalls are dropped without harm to a client already in; the token never
// crosses the wire in clear (a proxy in the test records every byte); a client certificate names
// the principal shown in status; plain TCP needs --insecure-listen.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "processes.hpp"
#include "test_support.hpp"

using namespace gfsvc;
using namespace gft;

namespace {

void shell(const std::string &command) {
  ASSERT_EQ(std::system(("(" + command + ") >/dev/null 2>&1").c_str()), 0) << command;
}

// A site CA in `dir`/NAME.pem (key NAME.key), and certificates it signs.
struct SiteCa {
  SiteCa(const TempDir &dir, const std::string &name) : dir_(dir / ""), name_(name) {
    shell("cd " + dir_ + " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 " +
          "-nodes -days 30 -subj '/CN=" + name + "' -keyout " + name + ".key -out " + name +
          ".pem");
  }
  std::string pem() const { return dir_ + name_ + ".pem"; }
  // CERT.pem and CERT.key for `cn`, naming `san` (e.g. "IP:127.0.0.1"), valid `days` (< 0:
  // expired already).
  std::string sign(const std::string &cert, const std::string &cn, const std::string &san,
                   int days = 30) const {
    shell("cd " + dir_ + " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes " +
          "-subj '/CN=" + cn + "' -keyout " + cert + ".key -out " + cert + ".csr && printf '" +
          "subjectAltName=" + san + "\\n' > " + cert + ".ext && openssl x509 -req -in " + cert +
          ".csr -CA " + name_ + ".pem -CAkey " + name_ + ".key -CAcreateserial -days " +
          std::to_string(days) + " -extfile " + cert + ".ext -out " + cert + ".pem");
    return dir_ + cert;
  }
  std::string dir_, name_;
};

// The service, TLS on 127.0.0.1 with `cert` (.pem and .key), plus `extra` flags.
class TlsService {
 public:
  TlsService(const TempDir &dir, const std::string &cert, std::vector<std::string> extra = {},
             const std::string &log_name = "serve.log")
      : service_(dir, 1, with(dir, cert, std::move(extra)), log_name) {
    if (!service_.ready()) return;
    const std::string line =
        service_.proc().expect("gpuflow serve: remote clients connect to", 10000 * kTimeFactor);
    const size_t at = line.find("tcp");
    if (at != std::string::npos) endpoint_ = line.substr(at, line.find(' ', at) - at);
  }
  bool ready() const { return !endpoint_.empty(); }
  const std::string &endpoint() const { return endpoint_; }
  int port() const { return std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1)); }
  Service &service() { return service_; }
  std::string log() const { return service_.log(); }

 private:
  static std::vector<std::string> with(const TempDir &dir, const std::string &cert,
                                       std::vector<std::string> extra) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--token-file", dir / "token"};
    if (!cert.empty()) {
      for (const std::string &a :
           std::vector<std::string>{"--tls-cert", cert + ".pem", "--tls-key", cert + ".key"})
        args.push_back(a);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  Service service_;
  std::string endpoint_;
};

bool wait_for(const std::function<bool()> &done, int ms) {
  const int64_t start = now_ns();
  while (!done()) {
    if (ms_since(start) > ms * kTimeFactor) return false;
    ::usleep(20000);
  }
  return true;
}

int tcp_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  return fd;
}

// Forwards connections on a port of its own to `port`, recording every byte both ways.
class RecordingProxy {
 public:
  explicit RecordingProxy(int port) : target_(port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr *>(&a), sizeof a);
    ::listen(listener_, 8);
    socklen_t size = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr *>(&a), &size);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  std::string bytes() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void run() {
    std::vector<std::pair<int, int>> pairs;  // (one side, the other)
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (auto [a, b] : pairs) fds.push_back({a, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int in = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        const int out = tcp_to(target_);
        pairs.push_back({in, out});
        pairs.push_back({out, in});
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buffer[65536];
        const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
        const int other = pairs[i - 1].second;
        if (n <= 0) {
          ::shutdown(other, SHUT_WR);
          continue;
        }
        {
          std::lock_guard lock(mu_);
          seen_.append(buffer, static_cast<size_t>(n));
        }
        if (::write(other, buffer, static_cast<size_t>(n)) != n) ::shutdown(fds[i].fd, SHUT_RD);
      }
    }
    for (auto [a, b] : pairs) ::close(a);
  }
  int target_, port_ = 0, listener_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string seen_;
};

std::string token_of(const TempDir &dir) {
  std::ifstream in(dir / "token");
  std::string token;
  std::getline(in, token);
  return token;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char *v : {"GPUFLOW_TLS_CA", "GPUFLOW_TLS_CERT", "GPUFLOW_TLS_KEY"}) ::unsetenv(v);
  }
  void TearDown() override { SetUp(); }
  std::shared_ptr<gf::client::Connection> open(const std::string &endpoint,
                                               const std::string &token_file) {
    return gf::client::Connection::open(endpoint, "tls_test", 1, 5000 * kTimeFactor, 0, token_file);
  }
  // The message the connection is refused with; "" when it was let in.
  std::string refusal(const std::string &endpoint, const std::string &token_file) {
    try {
      open(endpoint, token_file);
    } catch (const gf::Error &e) {
      return e.what();
    }
    return "";
  }
  TempDir dir;
};

TEST_F(TlsTest, TheServicesCertificateIsVerifiedAndBadOnesAreRefusedNamed) {
  SiteCa ca(dir, "site-ca"), other(dir, "other-ca");
  const std::string good = ca.sign("node", "node", "IP:127.0.0.1");
  TlsService service(dir, good);
  ASSERT_TRUE(service.ready()) << service.log();
  EXPECT_EQ(service.endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << service.endpoint();
  EXPECT_TRUE(contains(service.log(), "TLS 1.3 with the certificate " + good + ".pem"))
      << service.log();
  ::setenv("GPUFLOW_TLS_CA", ca.pem().c_str(), 1);
  auto in = open(service.endpoint(), dir / "token");  // the token, inside TLS
  ASSERT_TRUE(in->alive());
  // A client whose CA did not sign the service's certificate refuses it.
  ::setenv("GPUFLOW_TLS_CA", other.pem().c_str(), 1);
  std::string why = refusal(service.endpoint(), dir / "token");
  EXPECT_TRUE(contains(why, "does not verify: unable to get local issuer certificate")) << why;
  EXPECT_TRUE(contains(why, other.pem())) << why;
  // Services showing an expired certificate, one for another name, or a self-signed one.
  ::setenv("GPUFLOW_TLS_CA", ca.pem().c_str(), 1);
  struct Case {
    std::string name, cert, says;
  };
  const std::vector<Case> cases = {
      {"expired", ca.sign("expired", "node", "IP:127.0.0.1", -1), "certificate has expired"},
      {"wrong-name", ca.sign("elsewhere", "elsewhere", "DNS:elsewhere.example"),
       "IP address mismatch"},
      {"self-signed", "", "self-signed certificate"}};
  shell("cd " + (dir / "") + " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 " +
        "-nodes -days 30 -subj '/CN=node' -addext subjectAltName=IP:127.0.0.1 -keyout self.key " +
        "-out self.pem");
  for (const Case &k : cases) {
    TempDir other_dir;
    TlsService bad(other_dir, k.cert.empty() ? dir / "self" : k.cert, {}, "bad.log");
    ASSERT_TRUE(bad.ready()) << k.name << ": " << bad.log();
    why = refusal(bad.endpoint(), other_dir / "token");
    EXPECT_TRUE(contains(why, "showed a certificate that does not verify: " + k.says))
        << k.name << ": " << why;
  }
  // A plain-TCP client against the TLS listener is told so; the client already in is untouched.
  why = refusal("tcp+insecure://127.0.0.1:" + std::to_string(service.port()), dir / "token");
  EXPECT_TRUE(contains(why, "this service speaks TLS 1.3 on this port")) << why;
  EXPECT_TRUE(contains(service.log(), "disconnected: it does not speak TLS")) << service.log();
  auto again = open(service.endpoint(), dir / "token");
  EXPECT_TRUE(again->alive());
  EXPECT_TRUE(in->alive());
  auto [rc, out] = run_cli(dir, {"status", "--json", "--pool", service.service().endpoint()});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "\"tls_test\"")) << out;
}

TEST_F(TlsTest, AHandshakeThatStallsIsDroppedByTheHelloDeadline) {
  SiteCa ca(dir, "site-ca");
  TlsService service(dir, ca.sign("node", "node", "IP:127.0.0.1"));
  ASSERT_TRUE(service.ready()) << service.log();
  ::setenv("GPUFLOW_TLS_CA", ca.pem().c_str(), 1);
  auto in = open(service.endpoint(), dir / "token");
  // The first bytes of a TLS record, then nothing more.
  const int fd = tcp_to(service.port());
  ASSERT_EQ(::write(fd, "\x16\x03\x01", 3), 3);
  char sink[256];
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 30000 * kTimeFactor), 1) << "the stalled handshake was not dropped";
  EXPECT_LE(::read(fd, sink, sizeof sink), 0);
  ::close(fd);
  EXPECT_TRUE(
      wait_for([&] { return contains(service.log(), "no Hello with the token within"); }, 5000))
      << service.log();
  EXPECT_TRUE(in->alive());
}

TEST_F(TlsTest, TheTokenNeverCrossesTheWireInClear) {
  SiteCa ca(dir, "site-ca");
  TlsService service(dir, ca.sign("node", "node", "IP:127.0.0.1"));
  ASSERT_TRUE(service.ready()) << service.log();
  const std::string token = token_of(dir);
  ASSERT_GE(token.size(), 16u);
  ::setenv("GPUFLOW_TLS_CA", ca.pem().c_str(), 1);
  {
    RecordingProxy proxy(service.port());
    auto c = open("tcp://127.0.0.1:" + std::to_string(proxy.port()), dir / "token");
    ASSERT_TRUE(c->alive());
    const std::string wire = proxy.bytes();
    EXPECT_GT(wire.size(), 1000u);  // a handshake went through it
    EXPECT_EQ(wire.find(token), std::string::npos) << "the token crossed the wire in clear";
    EXPECT_EQ(wire.find("tls_test"), std::string::npos) << "the Hello crossed in clear";
  }
  // The same recording of a plain-TCP listener does see it: the check can fail.
  TempDir plain_dir;
  TlsService plain(plain_dir, "", {"--insecure-listen"}, "plain.log");
  ASSERT_TRUE(plain.ready()) << plain.log();
  EXPECT_EQ(plain.endpoint().rfind("tcp+insecure://", 0), 0u) << plain.endpoint();
  EXPECT_TRUE(contains(plain.log(), "WITHOUT TLS (--insecure-listen)")) << plain.log();
  RecordingProxy proxy(plain.port());
  auto c = open("tcp+insecure://127.0.0.1:" + std::to_string(proxy.port()), plain_dir / "token");
  EXPECT_NE(proxy.bytes().find(token_of(plain_dir)), std::string::npos);
}

TEST_F(TlsTest, AClientCertificateNamesThePrincipalInStatus) {
  SiteCa ca(dir, "site-ca"), users(dir, "users-ca");
  TlsService service(dir, ca.sign("node", "node", "IP:127.0.0.1"),
                     {"--tls-client-ca", users.pem()});
  ASSERT_TRUE(service.ready()) << service.log();
  const std::string alice = users.sign("alice", "alice", "DNS:alice");
  ::setenv("GPUFLOW_TLS_CA", ca.pem().c_str(), 1);
  ::setenv("GPUFLOW_TLS_CERT", (alice + ".pem").c_str(), 1);
  ::setenv("GPUFLOW_TLS_KEY", (alice + ".key").c_str(), 1);
  ::unsetenv("GPUFLOW_TOKEN_FILE");
  auto c = open(service.endpoint(), "");  // no token: the certificate says who it is
  ASSERT_TRUE(c->alive());
  auto [rc, out] = run_cli(dir, {"status", "--json", "--pool", service.service().endpoint()});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "alice@127.0.0.1:")) << out;
  // A certificate of a CA the service does not take is refused in the handshake.
  const std::string mallory = ca.sign("mallory", "mallory", "DNS:mallory");
  ::setenv("GPUFLOW_TLS_CERT", (mallory + ".pem").c_str(), 1);
  ::setenv("GPUFLOW_TLS_KEY", (mallory + ".key").c_str(), 1);
  const std::string why = refusal(service.endpoint(), "");
  EXPECT_TRUE(contains(why, "unknown ca")) << why;
  EXPECT_TRUE(c->alive());
}

// UCX's TCP is not encrypted: a TLS client's data plane runs only on a device the site trusts.
TEST_F(TlsTest, TheDataPlaneRunsOnlyOnATrustedDevice) {
  SiteCa ca(dir, "site-ca");
  const std::string cert = ca.sign("node", "node", "IP:127.0.0.1");
  ::setenv("GPUFLOW_TLS_CA", ca.pem().c_str(), 1);
  const std::vector<uint8_t> bytes(1 << 20, 7);
  {
    TlsService untrusted(dir, cert);
    ASSERT_TRUE(untrusted.ready()) << untrusted.log();
    auto c = open(untrusted.endpoint(), dir / "token");
    try {
      c->blobs().put(1, bytes.data(), bytes.size());
      ADD_FAILURE() << "a blob went over an untrusted device";
    } catch (const gf::Error &e) {
      EXPECT_TRUE(contains(e.what(), "--trusted-data-device lo")) << e.what();
    }
    EXPECT_TRUE(c->alive());
  }
  TempDir trusted_dir;
  TlsService trusted(trusted_dir, cert, {"--trusted-data-device", "lo"}, "trusted.log");
  ASSERT_TRUE(trusted.ready()) << trusted.log();
  auto c = open(trusted.endpoint(), trusted_dir / "token");
  c->blobs().put(1, bytes.data(), bytes.size());
  EXPECT_EQ(c->blobs().get(1), bytes);
  EXPECT_TRUE(contains(trusted.log(), "has a data plane (tcp (relayed))")) << trusted.log();
}

TEST_F(TlsTest, PlainTcpIsRefusedUnlessAskedForByName) {
  auto [rc, out] = run_cli(dir, {"serve", "--socket", dir / "gf.sock", "--listen", "127.0.0.1:0",
                                 "--token-file", dir / "token"});
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(contains(out, "needs TLS")) << out;
  EXPECT_TRUE(contains(out, "--insecure-listen")) << out;
}

}  // namespace
