#include "client/endpoint.hpp"

#include <errno.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/request_bounds.hpp"

namespace gf::client {

namespace {

// A service listens but its socket does not admit this user (`gpuflow serve --group`): says so
// and names the group to join, rather than "no service".
std::string not_admitted(const std::string &endpoint, const std::string &path) {
  std::string why =
      "cannot connect to the gpuflow service at " + endpoint + ": " + std::strerror(EACCES);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return why;  // a directory on the way is closed to us
  if ((st.st_mode & S_IWGRP) == 0) return why + " (the socket admits its owner only)";
  struct group entry {};
  struct group *found = nullptr;
  std::vector<char> buffer(1 << 16);
  std::string group = std::to_string(st.st_gid);
  if (::getgrgid_r(st.st_gid, &entry, buffer.data(), buffer.size(), &found) == 0 && found) {
    group = found->gr_name;
  }
  return why + " (the socket admits its owner and members of group '" + group +
         "' only: ask to be added to that group)";
}

}  // namespace

std::string socket_path_of(const std::string &endpoint) {
  static const std::string kUnix = "unix://";
  std::string path = endpoint.rfind(kUnix, 0) == 0 ? endpoint.substr(kUnix.size()) : endpoint;
  if (path.empty() || path[0] != '/') {
    fail(GF_ERR_INVALID_ARGUMENT, "endpoint '" + endpoint +
                                      "' is not a unix socket: use unix:///path/to.sock or an "
                                      "absolute path");
  }
  if (std::string why =
          bounds::bytes_over("the socket path of endpoint '" + endpoint + "'", path.size(),
                             "GF_MAX_SOCKET_PATH_BYTES", bounds::kMaxSocketPathBytes);
      !why.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, why);
  }
  return path;
}

std::string default_socket_path() {
  const char *runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && *runtime == '/') return std::string(runtime) + "/gpuflow.sock";
  return "/tmp/gpuflow-" + std::to_string(getuid()) + "/gpuflow.sock";
}

std::string resolve_endpoint(const char *configured) {
  std::string endpoint = configured ? configured : "";
  if (endpoint.empty()) {
    const char *env = std::getenv("GPUFLOW_POOL");
    endpoint = env ? env : "";
  }
  if (endpoint == "embedded") return {};
  return endpoint;
}

int connect_unix(const std::string &endpoint) {
  const std::string path = socket_path_of(endpoint);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(GF_ERR_SYSTEM, std::string("socket(): ") + std::strerror(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
    int e = errno;
    ::close(fd);
    if (e == EACCES) fail(GF_ERR_SYSTEM, not_admitted(endpoint, path));
    fail(GF_ERR_SYSTEM,
         "no gpuflow service at " + endpoint + ": " + std::strerror(e) +
             (e == ENOENT || e == ECONNREFUSED ? " (start one with `gpuflow serve`)" : ""));
  }
  return fd;
}

}  // namespace gf::client
