// C shims: checking the data plane to the node's service (gpuflow doctor).
#include <cmath>
#include <string>

#include "capi/bytes.hpp"
#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "pool/data_plane_check.hpp"

using namespace gf;
using namespace gf::capi;

extern "C" {

GF_API gf_status gf_data_plane_check(gf_bytes *out, gf_pool *pool, double seconds) {
  return guard([&] {
    require_out(out, "out");
    out->data = nullptr;
    out->size = 0;
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 3600) {
      fail(GF_ERR_INVALID_ARGUMENT,
           "seconds must be between 0 and 3600 (got " + std::to_string(seconds) + ")");
    }
    const std::shared_ptr<client::Connection> connection = pool ? connection_of(pool) : nullptr;
    give_bytes(out, data_plane_check_json(connection.get(), seconds));
    return GF_OK;
  });
}

}  // extern "C"
