#include "service/remote_access.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.hpp"
#include "core/host_port.hpp"
#include "core/regular_file.hpp"
#include "core/request_bounds.hpp"
#include "core/tcp_socket.hpp"

namespace gf::service {

namespace {

std::string text_of(const sockaddr_storage &address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto &in = reinterpret_cast<const sockaddr_in &>(address);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    port = ntohs(in.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto &in6 = reinterpret_cast<const sockaddr_in6 &>(address);
    inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    port = ntohs(in6.sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

bool executable(const std::string &path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string listen_tcp(uv_loop_t *loop, uv_tcp_t *tcp, const std::string &address,
                       uv_connection_cb on_connection, void *data) {
  const core::Address a = core::parse_address(address, "the listen address");
  sockaddr_in in{};
  uv_ip4_addr(a.host.c_str(), a.port, &in);
  uv_tcp_init(loop, tcp);
  tcp->data = data;
  int rc = uv_tcp_bind(tcp, reinterpret_cast<const sockaddr *>(&in), 0);
  if (rc == 0) {
    rc = uv_listen(reinterpret_cast<uv_stream_t *>(tcp), 128, on_connection);
  }
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t *>(tcp), nullptr);
    uv_run(loop, UV_RUN_NOWAIT);
    fail(GF_ERR_SYSTEM, "listening on " + address + ": " + uv_strerror(rc));
  }
  sockaddr_storage bound{};
  int size = sizeof bound;
  uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr *>(&bound), &size);
  std::string text = text_of(bound);
  if (a.host == "0.0.0.0") {
    // Every interface: clients elsewhere need a name they can reach, not 0.0.0.0.
    char host[256] = "";
    if (::gethostname(host, sizeof host - 1) == 0 && *host) {
      text = std::string(host) + text.substr(text.rfind(':'));
    }
  }
  return text;
}

void keep_alive(uv_tcp_t *tcp) {
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t *>(tcp), &fd) == 0) core::keep_alive(fd);
}

std::string load_token(const std::string &path) {
  if (path.empty()) fail(GF_ERR_INVALID_ARGUMENT, "a TCP listener needs a token file");
  // Never waiting on what the path names (a FIFO there would hold the start up for ever), and
  // not through a symbolic link, so that the owner and mode checked below are the file's read.
  const core::FileText file = core::read_regular_file(path, bounds::kMaxTokenFileBytes,
                                                      "the token file", core::Links::kRefuse);
  if (!file && file.error_number == ENOENT) {
    uint8_t random[32];
    if (::getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
      fail(GF_ERR_SYSTEM, std::string("getrandom: ") + std::strerror(errno));
    }
    std::string token;
    for (uint8_t b : random) {
      static const char digits[] = "0123456789abcdef";
      token += digits[b >> 4];
      token += digits[b & 15];
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      fail(GF_ERR_SYSTEM, "creating the token file " + path + ": " + std::strerror(errno));
    const std::string line = token + "\n";
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!written) fail(GF_ERR_SYSTEM, "writing the token file " + path);
    return token;
  }
  // Not a regular file, a link, too large: the administrator's to fix; anything else the system's.
  if (!file) fail(file.error_number ? GF_ERR_SYSTEM : GF_ERR_INVALID_ARGUMENT, file.error);
  const struct stat &st = file.status;
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 0777));
    fail(GF_ERR_INVALID_ARGUMENT, "the token file " + path + " (mode " + mode + ", owner uid " +
                                      std::to_string(st.st_uid) +
                                      ") must be this user's and readable by no one else (0600)");
  }
  const std::string &content = file.contents;
  std::string token = content.substr(0, content.find('\n'));
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 16) {
    fail(GF_ERR_INVALID_ARGUMENT,
         "the token in " + path + " is shorter than 16 characters: too easy to guess");
  }
  // Clients send it in their Hello and refuse to send a longer one (gpuflow.h).
  if (std::string why = bounds::bytes_over("the token in " + path, token.size(),
                                           "GF_MAX_TOKEN_BYTES", bounds::kMaxTokenBytes);
      !why.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, why);
  }
  return token;
}

bool same_token(const std::string &offered, const std::string &token) {
  unsigned char difference = offered.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    difference |= static_cast<unsigned char>(token[i] ^ (i < offered.size() ? offered[i] : 0));
  }
  return difference == 0;
}

std::string peer_address_of(uv_tcp_t *tcp) {
  sockaddr_storage peer{};
  int size = sizeof peer;
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr *>(&peer), &size) != 0) return "?";
  return text_of(peer);
}

std::string device_of(const uv_tcp_t *tcp) {
  uv_os_fd_t fd = -1;
  return uv_fileno(reinterpret_cast<const uv_handle_t *>(tcp), &fd) == 0
             ? core::device_of_socket(fd)
             : std::string();
}

std::string relay_program() {
  if (const char *env = std::getenv("GPUFLOW_RELAY"); env && *env) return env;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void *>(&relay_program), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const std::string dir = self.substr(0, self.rfind('/') + 1);
    for (const std::string &candidate : {dir + "gpuflow-relay", dir + GPUFLOW_RELAY_FROM_LIBDIR}) {
      if (executable(candidate)) return candidate;
    }
  }
  return {};
}

}  // namespace gf::service
