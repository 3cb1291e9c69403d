// `gpuflow doctor`'s data-plane lines: what UCX offers on this machine, which transports the
// connection to the service took, and a short self-test of it (gf_data_plane_check).
#pragma once

#include <gpuflow.h>

#include <functional>
#include <string>

namespace gpuflow_cli {

// Prints the lines; `line(ok, text)` prints a checked one. pool: a connected pool, or null for
// the machine's inventory only. Returns false when the check could not run at all.
void print_data_plane_check(gf_pool *pool, double seconds,
                            const std::function<void(bool ok, const std::string &)> &line);

}  // namespace gpuflow_cli
