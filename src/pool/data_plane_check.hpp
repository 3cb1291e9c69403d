// The data-plane check `gpuflow doctor` runs (gf_data_plane_check): what UCX offers on this
// machine, and, against a service, which transports the connection took and what it delivers —
// small put+get round trips and large puts and gets, each blob's content compared on its way
// back. One JSON document, so that programs can read it as well as people. It sits with the
// pool, not the connection: a check a pool runs through its connection, not a protocol of it.
#pragma once

#include <string>

namespace gf {

namespace client {
class Connection;
}

// `connection`: null for the machine's inventory only. `seconds`: about how long the transfers
// may take in all (at least one of each kind runs). Throws gf::Error: GF_ERR_STATE when the
// service offers no data plane to this process, GF_ERR_SYSTEM when a transfer fails, and
// GF_ERR_INTERNAL naming the size when bytes come back different.
std::string data_plane_check_json(client::Connection *connection, double seconds);

}  // namespace gf
