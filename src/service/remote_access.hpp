// What lets a client on another host in (docs/service.md, "Remote clients"): the TCP listener,
// the shared token that stands in for the peer credentials a unix socket gives, and which network
// device a connection came through (the remote data plane is kept to it).
#pragma once

#include <uv.h>

#include <string>

namespace gf::service {

// Binds and listens on "HOST:PORT" (IPv4; port 0 picks a free one), `data` on the handle, calling
// `on_connection` for each connection. Throws gf::Error naming it. Returns where clients connect,
// "HOST:PORT" with the port actually bound (and this host's name for 0.0.0.0).
std::string listen_tcp(uv_loop_t *loop, uv_tcp_t *tcp, const std::string &address,
                       uv_connection_cb on_connection, void *data);

// The token in `path`: created (0600, 256 random bits as hex) when the file does not exist.
// Refused (gf::Error naming the file and why) when anyone but its owner may read it, when it is
// not this user's, or when it holds fewer than 16 characters.
std::string load_token(const std::string &path);

// Whether `offered` is `token`, in time that does not depend on where they differ.
bool same_token(const std::string &offered, const std::string &token);

// core::keep_alive on an accepted connection.
void keep_alive(uv_tcp_t *tcp);

// The "IP:PORT" of a connection's other end, and the name of the local network device its
// traffic comes in through ("lo", "eth0", "veth1"; empty when not found).
std::string peer_address_of(uv_tcp_t *tcp);
std::string device_of(const uv_tcp_t *tcp);

// Where gpuflow-relay is: $GPUFLOW_RELAY, else next to the library (the build tree), else the
// install's libexec/gpuflow/ (found from the library's directory). Empty when none.
std::string relay_program();

}  // namespace gf::service
