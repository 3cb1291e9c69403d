#include "systemd_socket.hpp"

#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace gpuflow_cli {

int socket_from_systemd() {
  const char *fds = std::getenv("LISTEN_FDS");
  if (!fds) return 0;
  const std::string listen_fds = fds;
  const char *pid = std::getenv("LISTEN_PID");
  const std::string listen_pid = pid ? pid : "";
  // Unsets the variables: the service's own children (commands, the relay) must not take them.
  const int n = sd_listen_fds(1);
  if (n < 0) {
    throw std::runtime_error(
        "LISTEN_FDS=" + listen_fds + ": the sockets handed over cannot be used (" +
        std::strerror(-n) +
        "); gpuflow serve takes one socket (a unix stream socket that listens)");
  }
  if (n == 0) {
    throw std::runtime_error(
        "LISTEN_FDS=" + listen_fds +
        " is set, but LISTEN_PID=" + (listen_pid.empty() ? "(unset)" : listen_pid) +
        " is not this process (" + std::to_string(::getpid()) + "): no socket was handed to it");
  }
  if (n != 1) {
    throw std::runtime_error("LISTEN_FDS=" + listen_fds +
                             ": gpuflow serve takes one socket (a unix stream socket that "
                             "listens), not " +
                             std::to_string(n));
  }
  if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, nullptr, 0) <= 0) {
    throw std::runtime_error(
        "LISTEN_FDS=1: the socket handed over is not a unix stream socket that listens "
        "(gpuflow.socket: ListenStream=/run/gpuflow/gpuflow.sock)");
  }
  return SD_LISTEN_FDS_START;
}

void tell_systemd(const std::string &state) {
  sd_notify(0, state.c_str());
}

}  // namespace gpuflow_cli
