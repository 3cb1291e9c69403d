// The service's socket: binding it safely (private directory, mode, stale files), who is on the
// other end of a connection, and names for devices that have no UUID of their own.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>

#include "service/peer.hpp"

namespace gf::service {

// Binds `pipe` (initialised on `loop` here) to `path`: creates /tmp/gpuflow-$UID mode 0700 when
// the path lies in it, replaces a stale socket file (nothing listening), refuses a live one
// (GF_ERR_STATE) and anything that is not a socket, and sets mode 0600, or 0660 and the group
// when `group` is given. Throws gf::Error naming the path.
void listen_on(uv_loop_t *loop, uv_pipe_t *pipe, const std::string &path, const std::string &group);
void remove_socket_file(const std::string &path);

// The path `fd` is bound to, when it is an open unix stream socket bound to a path that listens
// (one systemd's socket activation hands over); anything else is refused, GF_ERR_INVALID_ARGUMENT
// naming listen_fd (as `named` says). The fd is only looked at.
std::string listening_socket_path(int fd, const std::string &named = "listen_fd");
// Has `pipe` (initialised on `loop` here) accept on a copy of `fd` (checked as above) that
// children of the service do not inherit; the caller closes `fd` once the copy is committed to,
// so a failed start leaves `fd` as it was. Its file and mode stay whoever made it's.
void adopt_listener(uv_loop_t *loop, uv_pipe_t *pipe, int fd);

// Who is connected, from the kernel (SO_PEERCRED), never from what the client says.
Peer peer_of(uv_os_fd_t fd);
// The user database's name for `uid`, or the number when it has none.
std::string user_name_of(uint32_t uid);

}  // namespace gf::service
