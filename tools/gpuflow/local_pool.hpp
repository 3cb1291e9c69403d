// The pool the graph commands (info, validate, run) build from their options, and why it came
// out emulated.
#pragma once

#include <gpuflow.h>

#include <string>

#include "options.hpp"

namespace gpuflow_cli {

// The pool the options describe, with their plugins loaded; null after saying why.
gf_pool *make_pool(const PoolOptions &options);

// Why a pool with the default backend runs on emulated devices, in the library's words ("no
// usable GPU: no GPU found (...)", "this build of gpuflow has no CUDA backend"); "" when it has
// real GPUs or the backend was chosen explicitly. The library says why only when the CUDA backend
// is forced, so this asks a throwaway pool for it.
std::string emulation_reason(const PoolOptions &options, gf_pool *pool);

// Whether this command was built with the library's CUDA backend (a build without one emulates
// devices by design: nothing to warn about).
constexpr bool kCudaBuild =
#ifdef GPUFLOW_CLI_CUDA_BUILD
    true;
#else
    false;
#endif

}  // namespace gpuflow_cli
