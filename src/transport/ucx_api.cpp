#include "transport/ucx_api.hpp"

#include <dlfcn.h>

#include <string>

#include "core/error.hpp"

namespace gf::transport {

namespace {

constexpr const char *kLibrary = "libucp.so.0";

struct Loaded {
  UcxApi api;
  std::string error;  // empty once loaded
};

Loaded load() {
  Loaded out;
  // Never unloaded: UCX keeps threads and hooks that outlive any context.
  void *handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = ::dlerror();
    out.error = std::string("cannot load UCX (") + kLibrary + "): " + (why ? why : "unknown");
    return out;
  }
#define GF_UCX_LOOKUP(name)                                                               \
  if (out.error.empty()) {                                                                \
    out.api.name = reinterpret_cast<decltype(out.api.name)>(::dlsym(handle, #name));      \
    if (!out.api.name) out.error = std::string("UCX (") + kLibrary + ") has no " + #name; \
  }
  GF_UCX_FUNCTIONS(GF_UCX_LOOKUP)
#undef GF_UCX_LOOKUP
  return out;
}

}  // namespace

const UcxApi &ucx() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) fail(GF_ERR_SYSTEM, loaded.error);
  return loaded.api;
}

}  // namespace gf::transport
