#include "client/tcp_connect.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/regular_file.hpp"
#include "core/request_bounds.hpp"
#include "core/tcp_socket.hpp"

namespace gf::client {

namespace {

constexpr const char *kTcp = "tcp://";
constexpr const char *kInsecureTcp = "tcp+insecure://";

// HOST and PORT of a remote endpoint; refused, naming it, when it has no such form.
std::pair<std::string, std::string> host_and_port(const std::string &endpoint) {
  const std::string rest =
      endpoint.substr(std::strlen(is_insecure_endpoint(endpoint) ? kInsecureTcp : kTcp));
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    fail(GF_ERR_INVALID_ARGUMENT,
         "endpoint '" + endpoint +
             "' is not tcp://HOST:PORT (e.g. tcp://10.0.0.5:7766; tcp+insecure://HOST:PORT "
             "without TLS)");
  }
  return {rest.substr(0, colon), rest.substr(colon + 1)};
}

}  // namespace

bool is_remote_endpoint(const std::string &endpoint) {
  return endpoint.rfind(kTcp, 0) == 0 || is_insecure_endpoint(endpoint);
}

bool is_insecure_endpoint(const std::string &endpoint) {
  return endpoint.rfind(kInsecureTcp, 0) == 0;
}

std::string host_of(const std::string &endpoint) {
  return host_and_port(endpoint).first;
}

int connect_tcp(const std::string &endpoint, int timeout_ms, std::string &device) {
  const auto [host, port] = host_and_port(endpoint);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    fail(GF_ERR_SYSTEM, "endpoint '" + endpoint + "': " + ::gai_strerror(rc));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo *a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = ETIMEDOUT;
      if (::poll(&p, 1, timeout_ms) == 1) {
        socklen_t size = sizeof error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      }
      rc = error == 0 ? 0 : -1;
      errno = error;
    }
    if (rc != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    fail(GF_ERR_SYSTEM, "no gpuflow service at " + endpoint + ": " + why +
                            " (start one there with `gpuflow serve --listen HOST:PORT "
                            "--token-file F`)");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  core::keep_alive(fd);
  device = core::device_of_socket(fd);
  if (device.empty()) {
    ::close(fd);
    fail(GF_ERR_SYSTEM, "connected to " + endpoint +
                            ", but no network device of this host has the address it left from "
                            "(the data plane goes over the same device)");
  }
  return fd;
}

std::string read_token(const std::string &endpoint, const std::string &token_file, bool optional) {
  std::string path = token_file;
  if (path.empty()) {
    const char *env = std::getenv("GPUFLOW_TOKEN_FILE");
    path = env ? env : "";
  }
  if (path.empty() && optional) return {};
  if (path.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT,
         "the service at " + endpoint +
             " is remote and needs its token: set GPUFLOW_TOKEN_FILE (or "
             "gf_pool_config.token_file, gpuflow --token-file) to a copy of its token file");
  }
  // A FIFO, a device or a directory there is refused for what it is, never waited on.
  const core::FileText file =
      core::read_regular_file(path, bounds::kMaxTokenFileBytes, "the token file");
  if (!file) fail(GF_ERR_INVALID_ARGUMENT, file.error + " (for " + endpoint + ")");
  std::string token = file.contents.substr(0, file.contents.find('\n'));
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) fail(GF_ERR_INVALID_ARGUMENT, "the token file " + path + " is empty");
  if (std::string why = bounds::bytes_over("the token in " + path, token.size(),
                                           "GF_MAX_TOKEN_BYTES", bounds::kMaxTokenBytes);
      !why.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, why + " (for " + endpoint + ")");
  }
  return token;
}

std::string user_name() {
  std::vector<char> buffer(1 << 14);
  passwd entry{};
  passwd *found = nullptr;
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found) {
    return found->pw_name;
  }
  return std::to_string(::getuid());
}

}  // namespace gf::client
