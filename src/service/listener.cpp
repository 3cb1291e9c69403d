#include "service/listener.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/request_bounds.hpp"

namespace gf::service {

namespace {

[[noreturn]] void system_error(const std::string &what, int error) {
  fail(GF_ERR_SYSTEM, what + ": " + std::strerror(error));
}

// Whether a service answers on `path` (a connect succeeds).
bool someone_listens(const std::string &path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
  bool live = ::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0;
  ::close(fd);
  return live;
}

void make_private_directory(const std::string &path) {
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string own = "/tmp/gpuflow-" + std::to_string(::getuid());
  if (dir != own) return;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) system_error("mkdir " + dir, errno);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) system_error("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0) {
    fail(GF_ERR_SYSTEM, dir + " is not a directory private to this user (owner " +
                            std::to_string(st.st_uid) + ", mode " +
                            std::to_string(st.st_mode & 0777) +
                            "): refusing to put the service's socket there");
  }
}

}  // namespace

void listen_on(uv_loop_t *loop, uv_pipe_t *pipe, const std::string &path,
               const std::string &group) {
  if (path.empty()) fail(GF_ERR_INVALID_ARGUMENT, "the socket path is empty");
  if (std::string why = bounds::bytes_over("socket path '" + path + "'", path.size(),
                                           "GF_MAX_SOCKET_PATH_BYTES", bounds::kMaxSocketPathBytes);
      !why.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, why);
  }
  gid_t gid = static_cast<gid_t>(-1);
  if (!group.empty()) {
    struct group entry {};
    struct group *found = nullptr;
    std::vector<char> buffer(1 << 16);
    if (::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
      fail(GF_ERR_INVALID_ARGUMENT, "no group named '" + group + "'");
    }
    gid = found->gr_gid;
  }
  make_private_directory(path);
  struct stat st {};
  // libuv reports a missing directory as EACCES (as Windows would): say what is wrong first.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int missing = ::stat(dir.c_str(), &st) == 0 ? 0 : errno;
  if (missing != 0 || !S_ISDIR(st.st_mode)) {
    fail(GF_ERR_SYSTEM, "cannot make the socket " + path + ": its directory " + dir +
                            (missing == ENOENT ? " does not exist"
                             : missing != 0    ? std::string(": ") + std::strerror(missing)
                                               : " is not a directory"));
  }
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      fail(GF_ERR_STATE, path + " exists and is not a socket: refusing to replace it");
    }
    if (someone_listens(path)) fail(GF_ERR_STATE, "a gpuflow service already listens at " + path);
    ::unlink(path.c_str());  // stale: its service is gone
  }
  uv_pipe_init(loop, pipe, 0);
  // Created with no permissions for anyone else, then opened up as asked.
  mode_t old_mask = ::umask(0177);
  int rc = uv_pipe_bind(pipe, path.c_str());
  ::umask(old_mask);
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t *>(pipe), nullptr);
    uv_run(loop, UV_RUN_NOWAIT);
    fail(GF_ERR_SYSTEM, "binding " + path + ": " + uv_strerror(rc));
  }
  if (!group.empty()) {
    if (::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0 ||
        ::chmod(path.c_str(), 0660) != 0) {
      int e = errno;
      uv_close(reinterpret_cast<uv_handle_t *>(pipe), nullptr);
      uv_run(loop, UV_RUN_NOWAIT);
      ::unlink(path.c_str());
      system_error("giving " + path + " to group '" + group + "'", e);
    }
  }
}

void remove_socket_file(const std::string &path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
}

std::string listening_socket_path(int fd, const std::string &named) {
  auto refuse = [fd, &named](const std::string &why) {
    fail(GF_ERR_INVALID_ARGUMENT, named + " " + std::to_string(fd) + " " + why +
                                      ": it must be a unix stream socket that listens");
  };
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) refuse("is not an open file descriptor");
  if (!S_ISSOCK(st.st_mode)) refuse("is not a socket");
  auto option = [fd](int name) {
    int value = -1;
    socklen_t size = sizeof value;
    return ::getsockopt(fd, SOL_SOCKET, name, &value, &size) == 0 ? value : -1;
  };
  if (option(SO_DOMAIN) != AF_UNIX) refuse("is not a unix socket");
  if (option(SO_TYPE) != SOCK_STREAM) refuse("is not a stream socket");
  if (option(SO_ACCEPTCONN) != 1) refuse("does not listen");
  sockaddr_un address{};
  socklen_t size = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &size) != 0 ||
      size <= offsetof(sockaddr_un, sun_path) || address.sun_path[0] == '\0') {
    refuse("is not bound to a path (clients find the service by its path)");
  }
  return std::string(address.sun_path,
                     ::strnlen(address.sun_path, size - offsetof(sockaddr_un, sun_path)));
}

void adopt_listener(uv_loop_t *loop, uv_pipe_t *pipe, int fd) {
  listening_socket_path(fd);
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) system_error("copying listen_fd " + std::to_string(fd), errno);
  uv_pipe_init(loop, pipe, 0);
  if (int rc = uv_pipe_open(pipe, copy); rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t *>(pipe), nullptr);
    uv_run(loop, UV_RUN_NOWAIT);
    ::close(copy);
    fail(GF_ERR_SYSTEM, "accepting on listen_fd " + std::to_string(fd) + ": " + uv_strerror(rc));
  }
}

std::string user_name_of(uint32_t uid) {
  struct passwd entry {};
  struct passwd *found = nullptr;
  std::vector<char> buffer(1 << 14);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

Peer peer_of(uv_os_fd_t fd) {
  Peer peer;
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0) {
    peer.uid = credentials.uid;
    peer.pid = static_cast<uint32_t>(credentials.pid);
  }
  peer.user = peer.uid == UINT32_MAX ? std::to_string(peer.uid) : user_name_of(peer.uid);
  peer.privileged = peer.uid == 0 || peer.uid == ::getuid();
  return peer;
}

}  // namespace gf::service
