#include "kernels/kernel_registry.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>

#include <mutex>

#include "core/error.hpp"
#include "core/regular_file.hpp"
#include "gpuflow_plugin.h"
#include "graph/kernel_name.hpp"

namespace gf {

KernelRegistry::~KernelRegistry() {
  for (auto &e : entries_) {
    if (e->destroy) e->destroy(e->body.user_data);
  }
  entries_.clear();  // destructors may live in the plugins: run them before unloading
  for (void *lib : libraries_) dlclose(lib);
}

void KernelRegistry::add(const gf_kernel_desc &desc) {
  if (desc.struct_size != sizeof(gf_kernel_desc)) {
    fail(GF_ERR_STRUCT_SIZE, "struct gf_kernel_desc has struct_size " +
                                 std::to_string(desc.struct_size) + "; this library expects " +
                                 std::to_string(sizeof(gf_kernel_desc)) +
                                 " (use GF_KERNEL_DESC_INIT or gf_kernel_desc_init)");
  }
  if (!desc.name || !valid_kernel_name(desc.name)) {
    fail(GF_ERR_INVALID_ARGUMENT, "kernel name '" + std::string(desc.name ? desc.name : "(null)") +
                                      "' is invalid: 1 to 255 characters from [A-Za-z0-9_.:/-]");
  }
  if (!desc.cpu_fn && !desc.gpu_fn) {
    fail(GF_ERR_INVALID_ARGUMENT,
         "kernel '" + std::string(desc.name) + "' has no body: set cpu_fn and/or gpu_fn");
  }
  auto entry = std::make_unique<Entry>();
  entry->name = desc.name;
  entry->body = TaskBody{desc.cpu_fn, desc.gpu_fn, desc.user_data};
  entry->destroy = desc.user_data_destroy;
  std::unique_lock lock(mu_);
  if (by_name_.count(entry->name)) {
    fail(GF_ERR_INVALID_ARGUMENT,
         "kernel '" + entry->name + "' is already registered with this pool (names are unique)");
  }
  entries_.reserve(entries_.size() + 1);  // so that the push below cannot throw after the insert
  by_name_.emplace(entry->name, entry.get());
  entries_.push_back(std::move(entry));
}

bool KernelRegistry::resolve(const std::string &name, TaskBody &out) const {
  std::shared_lock lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return false;
  out = it->second->body;
  return true;
}

size_t KernelRegistry::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

const std::string &KernelRegistry::name(size_t index) const {
  std::shared_lock lock(mu_);
  if (index >= entries_.size()) {
    fail(GF_ERR_INVALID_ARGUMENT, "kernel index " + std::to_string(index) +
                                      " is out of range; the pool has " +
                                      std::to_string(entries_.size()) + " kernels");
  }
  return entries_[index]->name;
}

namespace {

struct HostContext {
  KernelRegistry *registry;
  std::string error;
};

gf_status host_register(const gf_plugin_host *host, const gf_kernel_desc *desc) {
  auto &ctx = *static_cast<HostContext *>(host->internal);
  try {
    if (!desc) fail(GF_ERR_INVALID_ARGUMENT, "gf_kernel_desc pointer is NULL");
    ctx.registry->add(*desc);
    return GF_OK;
  } catch (const Error &e) {
    ctx.error = e.what();
    return e.status();
  } catch (...) {
    ctx.error = "out of memory registering a kernel";
    return GF_ERR_OUT_OF_MEMORY;
  }
}

void host_fail(const gf_plugin_host *host, const char *message) {
  auto &ctx = *static_cast<HostContext *>(host->internal);
  try {
    ctx.error = message && *message ? message : "failed (no message given)";
  } catch (...) {
  }
}

}  // namespace

void KernelRegistry::load_plugin(const std::string &path) {
  if (path.empty()) fail(GF_ERR_INVALID_ARGUMENT, "plugin path is empty");
  const std::string where = "plugin '" + path + "'";
  if (path.find('/') != std::string::npos) {
    if (access(path.c_str(), F_OK) != 0) fail(GF_ERR_NOT_FOUND, where + ": no such file");
    // dlopen opens the path as any reader does: a FIFO would hold the load (and a service's
    // start) up for ever, a device would be read as a library. A bare name is looked up in the
    // library directories instead, which hold libraries.
    if (std::string why = core::regular_file_problem(path, "the plugin"); !why.empty()) {
      fail(GF_ERR_INVALID_ARGUMENT, why);
    }
  }
  dlerror();
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    std::string reason = why ? why : "unknown reason";
    bool missing = reason.find("No such file") != std::string::npos;
    fail(missing ? GF_ERR_NOT_FOUND : GF_ERR_INVALID_ARGUMENT,
         where + ": cannot be loaded: " + reason);
  }
  struct Closer {
    void *lib;
    ~Closer() {
      if (lib) dlclose(lib);
    }
  } closer{lib};
  void *symbol = dlsym(lib, GF_PLUGIN_ENTRY_POINT);
  if (!symbol) {
    fail(GF_ERR_NOT_FOUND, where + " does not export the entry point " GF_PLUGIN_ENTRY_POINT
                                   " (is it a gpuflow plugin? see gpuflow_plugin.h)");
  }
  gf_plugin_describe_fn describe;
  static_assert(sizeof describe == sizeof symbol);
  std::memcpy(&describe, &symbol, sizeof describe);
  // Plugins are C interfaces, but one written in C++ may let an exception escape: that is the
  // plugin's failure to load, named with its path, never a gpuflow internal error.
  auto thrown = [&](const std::string &step) {
    try {
      throw;
    } catch (const std::exception &e) {
      return where + step + " threw an exception: " + e.what();
    } catch (...) {
      return where + step + " threw an exception that is not a std::exception";
    }
  };
  const gf_plugin_desc *desc = nullptr;
  try {
    desc = describe();
  } catch (...) {
    fail(GF_ERR_INVALID_ARGUMENT, thrown(": " GF_PLUGIN_ENTRY_POINT));
  }
  if (!desc || !desc->init) {
    fail(GF_ERR_INVALID_ARGUMENT,
         where + ": " GF_PLUGIN_ENTRY_POINT " returned no description or no init function");
  }
  if (desc->abi_version != GF_PLUGIN_ABI_VERSION) {
    fail(GF_ERR_VERSION_MISMATCH,
         where + " was built for plugin ABI version " + std::to_string(desc->abi_version) +
             "; this gpuflow loads version " + std::to_string(GF_PLUGIN_ABI_VERSION) +
             " (rebuild the plugin against this gpuflow_plugin.h)");
  }
  // Keep the library loaded from here on: init may register kernels before it fails.
  {
    std::unique_lock lock(mu_);
    libraries_.push_back(lib);
  }
  closer.lib = nullptr;
  HostContext ctx{this, {}};
  gf_plugin_host host{};
  host.struct_size = sizeof host;
  host.abi_version = GF_PLUGIN_ABI_VERSION;
  host.gpuflow_version = gf_version();
  host.plugin_path = path.c_str();
  host.register_kernel = host_register;
  host.fail = host_fail;
  host.internal = &ctx;
  std::string name = desc->name ? desc->name : "?";
  gf_status status = GF_OK;
  try {
    status = desc->init(&host);
  } catch (...) {
    fail(GF_ERR_INVALID_ARGUMENT, thrown(" (" + name + ") failed to initialise: init"));
  }
  if (status != GF_OK) {
    fail(status < 0 ? status : GF_ERR_INVALID_ARGUMENT,
         where + " (" + name + ") failed to initialise: " +
             (ctx.error.empty() ? std::string("init returned ") + gf_status_name(status)
                                : ctx.error));
  }
}

}  // namespace gf
