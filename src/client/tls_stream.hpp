// A connection to a remote service through TLS 1.3 (docs/service.md, "TLS"): the handshake,
// checking the service's certificate for the endpoint's host against the site's CA, and then
// the session's bytes over the socket, one OpenSSL call at a time (the reader thread and the
// writers take turns; neither holds the other up while it waits on the socket).
#pragma once

#include <memory>
#include <string>

#include "client/byte_stream.hpp"
#include "core/tls.hpp"

namespace gf::client {

// This process's TLS files for tcp:// endpoints: GPUFLOW_TLS_CA (the site's CA; unset: the
// system's trust store), GPUFLOW_TLS_CERT and GPUFLOW_TLS_KEY (a client certificate, optional).
tls::ClientFiles client_tls_files();

// Shakes hands over `fd` (connected to `host`) within `timeout_ms`. Takes the socket. Throws
// gf::Error (GF_ERR_SYSTEM) naming `endpoint` and why: a certificate that does not verify (and
// what it was checked against), a service that does not speak TLS, no answer in time.
std::unique_ptr<ByteStream> tls_connect(int fd, const std::string &endpoint,
                                        const std::string &host, const tls::ClientFiles &files,
                                        int timeout_ms);

}  // namespace gf::client
