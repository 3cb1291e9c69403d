// Which service the gpuflow command's clients find when told none (issue 27, item 2): the user's
// own service's socket, else the node's system service's, else the user's (named in the error).
// A temporary directory stands in for $XDG_RUNTIME_DIR and, through GPUFLOW_SYSTEM_SOCKET, for
// /run/gpuflow; only whether a socket file is there counts, so the sockets here have no listener.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "processes.hpp"
#include "service_client.hpp"

namespace {

using gpuflow_cli::default_client_endpoint;
using gpuflow_cli::service_endpoint;
using gpuflow_cli::system_socket_path;

// A socket file at `path`, as a service that died leaves one.
void make_socket_file(const std::string &path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address), 0) << path;
  ::close(fd);
}

class ClientEndpoint : public ::testing::Test {
 protected:
  // Before anything asks gf_default_endpoint, which reads XDG_RUNTIME_DIR once per process
  // (ctest runs each test in a process of its own).
  void SetUp() override {
    ::mkdir((dir / "user").c_str(), 0700);
    ::mkdir((dir / "run").c_str(), 0755);
    ::setenv("XDG_RUNTIME_DIR", (dir / "user").c_str(), 1);
    ::setenv("GPUFLOW_SYSTEM_SOCKET", system.c_str(), 1);
    ::unsetenv("GPUFLOW_POOL");
  }
  void TearDown() override { ::unsetenv("GPUFLOW_SYSTEM_SOCKET"); }

  gfsvc::TempDir dir;
  const std::string own = dir / "user/gpuflow.sock";
  const std::string system = dir / "run/gpuflow.sock";
};

TEST_F(ClientEndpoint, ServeListensWhereTheUsersOwnServiceIsLookedFor) {
  EXPECT_EQ(std::string(gf_default_endpoint()), "unix://" + own);
}

TEST_F(ClientEndpoint, NoSocketAnywhereNamesTheUsersOwn) {
  EXPECT_EQ(default_client_endpoint(), "unix://" + own);
}

TEST_F(ClientEndpoint, TheSystemSocketWhenTheUserRunsNoService) {
  make_socket_file(system);
  EXPECT_EQ(default_client_endpoint(), "unix://" + system);
  EXPECT_EQ(service_endpoint(""), "unix://" + system);
}

TEST_F(ClientEndpoint, TheUsersOwnServiceComesFirst) {
  make_socket_file(system);
  make_socket_file(own);
  EXPECT_EQ(default_client_endpoint(), "unix://" + own);
}

TEST_F(ClientEndpoint, OnlyASocketCounts) {
  std::ofstream(system) << "not a socket\n";
  EXPECT_EQ(default_client_endpoint(), "unix://" + own);
}

TEST_F(ClientEndpoint, ANamedServiceWinsOverBoth) {
  make_socket_file(system);
  make_socket_file(own);
  EXPECT_EQ(service_endpoint("unix:///elsewhere.sock"), "unix:///elsewhere.sock");
  ::setenv("GPUFLOW_POOL", "tcp://node:7000", 1);
  EXPECT_EQ(service_endpoint(""), "tcp://node:7000");
  EXPECT_EQ(service_endpoint("unix:///elsewhere.sock"), "unix:///elsewhere.sock");
  ::unsetenv("GPUFLOW_POOL");
}

TEST_F(ClientEndpoint, TheSystemSocketIsRunGpuflowUnlessToldOtherwise) {
  EXPECT_EQ(system_socket_path(), system);
  ::unsetenv("GPUFLOW_SYSTEM_SOCKET");
  EXPECT_EQ(system_socket_path(), "/run/gpuflow/gpuflow.sock");
  ::setenv("GPUFLOW_SYSTEM_SOCKET", "", 1);
  EXPECT_EQ(system_socket_path(), "/run/gpuflow/gpuflow.sock");
}

}  // namespace
