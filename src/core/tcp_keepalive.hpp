// TCP keepalive probes and a user timeout on a connection to or from another host, so a peer
// whose host died or left the network (no FIN ever comes) is noticed within about a minute
// rather than never: its leases go back, and calls waiting on it fail.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace gf::core {

inline void keep_alive(int fd) {
  int on = 1, idle = 10, interval = 5, count = 6;
  unsigned user_timeout_ms = 60000;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

}  // namespace gf::core
