// A service accepting on a socket handed over to it (gf_service_config.listen_fd), as systemd's
// socket activation hands `gpuflow serve` one: the socket was made, bound and put to listening
// by someone else, whose file and mode it stays.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fcntl.h>

#include <cstddef>

#include "in_process_service.hpp"

namespace {
using namespace gft;

// A unix socket of `type` bound to `path` (none: unbound; "@name": abstract, no file),
// listening when `listening`.
int unix_socket(const std::string &path, int type = SOCK_STREAM, bool listening = true) {
  const int fd = ::socket(AF_UNIX, type, 0);
  if (!path.empty()) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (path[0] == '@') a.sun_path[0] = '\0';
    const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), size), 0) << path;
  }
  if (listening) {
    EXPECT_EQ(::listen(fd, 16), 0);
  }
  return fd;
}

bool connectable(const std::string &path) {
  const int fd = unix_socket("", SOCK_STREAM, false);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

gf_service_config on_fd(int fd, const gf_pool_config *pool) {
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.pool = pool;
  c.listen_fd = fd;
  return c;
}

TEST(ServiceActivation, ServesOnAHandedOverSocketAndLeavesItsFile) {
  SocketDir dir;
  const std::string path = dir.path + "/gpuflow.sock";
  const int fd = unix_socket(path);
  ASSERT_EQ(::chmod(path.c_str(), 0660), 0);  // systemd's SocketMode=, not the service's 0600
  const gf_pool_config pool = host_config(2, 2);
  gf_service_config c = on_fd(fd, &pool);
  c.socket_path = "/nonexistent/ignored.sock";
  LogLines log;
  log.attach(c);
  ServiceHandle service = start(c);
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(std::string(gf_service_endpoint(service.get())), "unix://" + path);
  EXPECT_TRUE(log.has("handed over as fd " + std::to_string(fd))) << log.text;
  {
    Pool client = connect_to(service.get());
    ASSERT_NE(client, nullptr);
    gf_status st;
    LeaseHandle lease = acquire(client.get(), 2, 5000, &st);
    EXPECT_EQ(st, GF_OK) << describe(st);
    struct stat saved {};
    EXPECT_EQ(::stat((path + ".leases.a").c_str(), &saved), 0) << "saved grants live beside it";
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u) << "the socket's mode is its creator's";
  service.reset();
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << "the socket file is its creator's to remove";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_FALSE(connectable(path)) << "the service closed the socket at stop";
}

TEST(ServiceActivation, ASecondServiceMayTakeTheSameSocketOver) {
  // systemd restarting the service hands the same socket over again; what clients queued on it
  // meanwhile is accepted by the next service.
  SocketDir dir;
  const std::string path = dir.path + "/gpuflow.sock";
  const int fd = unix_socket(path);
  const int kept = ::dup(fd);  // systemd keeps its own copy across the service's restarts
  const gf_pool_config pool = host_config(1, 1);
  start(on_fd(fd, &pool)).reset();
  ASSERT_TRUE(connectable(path)) << "still listening in systemd's copy";
  ServiceHandle again = start(on_fd(kept, &pool));
  ASSERT_NE(again, nullptr);
  Pool client = connect_to(again.get());
  EXPECT_NE(client, nullptr);
}

TEST(ServiceActivation, RefusesWhatIsNotAListeningUnixStreamSocketNamingListenFd) {
  SocketDir dir;
  const std::string file = dir.path + "/regular";
  struct Case {
    const char *what;
    int fd;
  };
  int closed = ::open("/dev/null", O_RDONLY);
  ::close(closed);
  int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in loopback{};
  loopback.sin_family = AF_INET;
  loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(tcp, reinterpret_cast<sockaddr *>(&loopback), sizeof loopback), 0);
  EXPECT_EQ(::listen(tcp, 4), 0);
  const Case cases[] = {
      {"a regular file", ::open(file.c_str(), O_RDWR | O_CREAT, 0600)},
      {"a unix socket that does not listen",
       unix_socket(dir.path + "/idle.sock", SOCK_STREAM, false)},
      {"a unix datagram socket", unix_socket(dir.path + "/dgram.sock", SOCK_DGRAM, false)},
      {"a TCP socket that listens", tcp},
      {"an abstract unix socket that listens",
       unix_socket("@gpuflow-test-" + std::to_string(::getpid()))},
      {"a closed descriptor", closed},
      {"a negative descriptor", -1},
  };
  const gf_pool_config pool = host_config(1, 1);
  for (const Case &k : cases) {
    const gf_service_config c = on_fd(k.fd, &pool);
    gf_service *s = nullptr;
    const std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_start(&s, &c));
    EXPECT_NE(m.find("gf_service_config.listen_fd"), std::string::npos) << k.what << ": " << m;
    EXPECT_EQ(s, nullptr) << k.what;
    if (k.fd != closed && k.fd >= 0) {
      EXPECT_NE(::fcntl(k.fd, F_GETFD), -1) << k.what << ": a refused fd stays the caller's";
      ::close(k.fd);
    }
  }
}

}  // namespace
