#include "transport/ucx_api.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <string>

#include "core/error.hpp"

namespace gf::transport {

namespace {

// Chosen at configure time (-DGPUFLOW_UCX_LIBRARY, e.g. a CUDA-enabled UCX's libucp.so);
// $GPUFLOW_UCX_LIBRARY overrides it at run time.
std::string library_name() {
  const char *env = std::getenv("GPUFLOW_UCX_LIBRARY");
  return env && *env ? env : GPUFLOW_UCX_LIBRARY_DEFAULT;
}

struct Loaded {
  UcxApi api;
  std::string error;  // empty once loaded
  std::string path;   // the file the dynamic loader found
};

Loaded load() {
  Loaded out;
  const std::string name = library_name();
  const char *kLibrary = name.c_str();
  // Never unloaded: UCX keeps threads and hooks that outlive any context.
  void *handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = ::dlerror();
    out.error = std::string("cannot load UCX (") + kLibrary + "): " + (why ? why : "unknown");
    return out;
  }
  link_map *map = nullptr;
  out.path =
      ::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? map->l_name : name;
#define GF_UCX_LOOKUP(name)                                                               \
  if (out.error.empty()) {                                                                \
    out.api.name = reinterpret_cast<decltype(out.api.name)>(::dlsym(handle, #name));      \
    if (!out.api.name) out.error = std::string("UCX (") + kLibrary + ") has no " + #name; \
  }
  GF_UCX_FUNCTIONS(GF_UCX_LOOKUP)
#undef GF_UCX_LOOKUP
  return out;
}

const Loaded &loaded() {
  static const Loaded once = load();
  return once;
}

}  // namespace

const UcxApi &ucx() {
  if (!loaded().error.empty()) fail(GF_ERR_SYSTEM, loaded().error);
  return loaded().api;
}

const std::string &ucx_library() {
  ucx();
  return loaded().path;
}

}  // namespace gf::transport
