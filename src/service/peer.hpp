// Who is on the other end of a service connection, settled once and then only read: a unix
// socket's peer from the kernel at accept (SO_PEERCRED), a remote one's at its Hello (the token
// vouches for it; its user and pid are what it declared), and a pool of the service's own (a
// graph run in the service) takes the identity of the client it leases for. What differs between
// local and remote clients is read from here, never decided again.
#pragma once

#include <cstdint>
#include <string>

namespace gf::service {

struct Peer {
  uint32_t uid = UINT32_MAX;
  uint32_t pid = 0;
  std::string user;         // the uid's name, or the number; remote: "USER@IP:PORT"
  bool privileged = false;  // root or the service's own user: may act on others' leases
  // A remote client (docs/service.md, "Remote clients"): its pid, directories and process groups
  // are another host's, and its uid is the service's own (the token is that user's, lent).
  bool remote = false;
  std::string address;  // remote: "IP:PORT" of its connection
  bool tls = false;     // remote: over TLS (its data plane is then kept to trusted devices)
  // Remote, over mutual TLS: the common name of its certificate, who it is (shown, and charged
  // by fair share as an account of its own).
  std::string principal;
  uint64_t start = 0;  // on this host: when its process started (jobs::start_time)

  // Its pid, directories and process groups are this host's: it may bind a job to a lease, its
  // jobs outlive it, and a graph it runs may start in its working directory.
  bool on_this_host() const { return !remote; }
  // Its fair-share account: its uid, or for a certificate's principal a number of its own, outside
  // the range of uids that systems hand out (FNV-1a of the name, high bit set).
  uint32_t account() const {
    if (principal.empty()) return uid;
    uint32_t h = 2166136261u;
    for (unsigned char ch : principal) h = (h ^ ch) * 16777619u;
    return (h | 0x80000000u) == UINT32_MAX ? 0xfffffffeu : (h | 0x80000000u);
  }
  // "pid 42, alice" or "remote, alice@10.0.0.2:5000": how log lines name it.
  std::string described() const {
    return (remote ? "remote, " : "pid " + std::to_string(pid) + ", ") + user;
  }
};

}  // namespace gf::service
