// What `gpuflow serve` says to and takes from systemd (libsystemd's sd-daemon): the listening
// socket gpuflow.socket hands over (socket activation: the first client starts the service, and
// connection attempts during a restart wait in the socket's queue instead of failing), and the
// service's state for Type=notify (ready, reloading, stopping). Without systemd both do nothing.
#pragma once

#include <string>

namespace gpuflow_cli {

// The socket systemd handed over (LISTEN_FDS, LISTEN_PID): its fd, or 0 when none was. Throws
// std::runtime_error saying what does not match when LISTEN_FDS is set but is not one listening
// unix stream socket for this process.
int socket_from_systemd();

// Tells systemd the service's state ("READY=1", "RELOADING=1", "STOPPING=1", "STATUS=…"); does
// nothing when the service was not started by systemd with Type=notify.
void tell_systemd(const std::string &state);

}  // namespace gpuflow_cli
