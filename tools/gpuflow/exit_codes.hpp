// The command's exit codes (documented in its usage, README.md and docs/graph-format.md) and the
// one way it reports a failed library call.
#pragma once

#include <gpuflow.h>

#include <cstdio>
#include <string>

namespace gpuflow_cli {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // the run failed or was cancelled
constexpr int kExitError = 2;   // nothing ran: usage, graph, plugin, pool or service error

// Says "gpuflow: WHAT: <the library's last error>" and returns kExitError.
inline int library_error(const std::string &what) {
  std::fprintf(stderr, "gpuflow: %s: %s\n", what.c_str(), gf_last_error());
  return kExitError;
}

}  // namespace gpuflow_cli
