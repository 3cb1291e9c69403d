// What both ends of a connection between hosts need from its socket: keepalive, and the network
// device its traffic goes through (the remote data plane is kept to that device).
#pragma once

#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>

namespace gf::core {

// TCP keepalive probes and a user timeout, so a peer whose host died or left the network (no FIN
// ever comes) is noticed within about a minute rather than never: its leases go back, and calls
// waiting on it fail.
inline void keep_alive(int fd) {
  int on = 1, idle = 10, interval = 5, count = 6;
  unsigned user_timeout_ms = 60000;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

// The name of the local network device that has the IPv4 address `fd` is bound to ("lo",
// "eth0"); empty when none has it (a NAT or virtual address).
inline std::string device_of_socket(int fd) {
  sockaddr_in local{};
  socklen_t size = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &size) != 0 ||
      local.sin_family != AF_INET) {
    return {};
  }
  ifaddrs *all = nullptr;
  if (::getifaddrs(&all) != 0) return {};
  std::string name;
  for (ifaddrs *i = all; i && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr == local.sin_addr.s_addr) {
      name = i->ifa_name;
    }
  }
  ::freeifaddrs(all);
  return name;
}

}  // namespace gf::core
