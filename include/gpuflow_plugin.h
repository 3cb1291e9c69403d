/*
 * gpuflow_plugin.h — the interface between gpuflow and kernel plugin libraries.
 *
 * A plugin is a shared library that gf_pool_load_plugin() opens with dlopen. It exports exactly
 * one C symbol, gf_plugin_describe, returning a static description that says which plugin ABI
 * version it was built for and how to register its kernels:
 *
 *     #include <gpuflow_plugin.h>
 *
 *     static int saxpy_cpu(gf_task_ctx *ctx, void *user_data) { ... }
 *
 *     static gf_status init(const gf_plugin_host *host) {
 *       gf_kernel_desc k = GF_KERNEL_DESC_INIT;
 *       k.name = "mylib.saxpy";
 *       k.cpu_fn = saxpy_cpu;
 *       return host->register_kernel(host, &k);
 *     }
 *
 *     GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
 *       static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "mylib", "1.0", init};
 *       return &desc;
 *     }
 *
 * Loading: gpuflow calls gf_plugin_describe, compares desc->abi_version with its own (a mismatch
 * is GF_ERR_VERSION_MISMATCH naming the library and both versions, and init is never called),
 * then calls desc->init once per pool that loads the library, on the thread calling
 * gf_pool_load_plugin. init registers kernels through the host table and returns GF_OK, or an
 * error after host->fail() said why. A C++ exception escaping init (or gf_plugin_describe) is a
 * failed load too: the error names the library and the exception's what(). Kernel bodies are
 * ordinary gf_task_fn bodies: they use the gf_task_ctx_* functions of gpuflow.h (the plugin
 * links against libgpuflow, or leaves those symbols to be resolved from the process that loaded
 * it). A plugin must not unload itself; the
 * library stays loaded until every pool that loaded it is destroyed.
 *
 * Stability promise (weaker than gpuflow.h's, and stated here so plugin authors can rely on it):
 * - GF_PLUGIN_ABI_VERSION changes whenever gf_plugin_desc changes or a field of gf_plugin_host
 *   changes meaning. gpuflow loads only plugins built for its own ABI version; a plugin is
 *   rebuilt (not rewritten) for a new version as long as the functions it uses still exist.
 * - Within one ABI version, gf_plugin_host is append-only: new functions are added at the end and
 *   host->struct_size grows, so a plugin built against an older header of the same ABI version
 *   keeps working. A plugin that wants a newer function checks host->struct_size first
 *   (GF_PLUGIN_HOST_HAS).
 * - Everything plugins share with applications (gf_kernel_desc, gf_task_fn, gf_task_ctx_*) is
 *   the public ABI of gpuflow.h and carries its stronger promise.
 */
#ifndef GPUFLOW_PLUGIN_H
#define GPUFLOW_PLUGIN_H

#include "gpuflow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The plugin ABI version this header describes. */
#define GF_PLUGIN_ABI_VERSION 1

/* The one symbol a plugin exports, by this name. */
#define GF_PLUGIN_ENTRY_POINT "gf_plugin_describe"

#if defined(_WIN32)
#define GF_PLUGIN_EXPORT __declspec(dllexport)
#else
#define GF_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* What gpuflow offers a plugin while its init runs. Valid only during that call. */
typedef struct gf_plugin_host gf_plugin_host;
struct gf_plugin_host {
  uint32_t struct_size;     /* grows as functions are appended */
  uint32_t abi_version;     /* GF_PLUGIN_ABI_VERSION of the loading library */
  uint32_t gpuflow_version; /* gf_version() of the loading library */
  const char *plugin_path;  /* the path given to gf_pool_load_plugin; borrowed */
  /* Registers a kernel with the pool loading the plugin; same rules and errors as
   * gf_pool_register_kernel (ownership of user_data passes to the pool on success). */
  gf_status (*register_kernel)(const gf_plugin_host *host, const gf_kernel_desc *desc);
  /* Records why init fails (copied); init then returns a negative gf_status. */
  void (*fail)(const gf_plugin_host *host, const char *message);
  void *internal; /* gpuflow's own; do not touch */
};

/* True when `host` offers `member` (a plugin built against a newer header of the same ABI
 * version may run on an older library). */
#define GF_PLUGIN_HOST_HAS(host, member) \
  ((host)->struct_size >= offsetof(gf_plugin_host, member) + sizeof((host)->member))

/* A plugin's static description. Its layout is fixed for a given GF_PLUGIN_ABI_VERSION. */
typedef struct gf_plugin_desc {
  uint32_t abi_version; /* GF_PLUGIN_ABI_VERSION the plugin was built with */
  const char *name;     /* for messages, e.g. "mylib" */
  const char *version;  /* the plugin's own version, for messages and `gpuflow info` */
  gf_status (*init)(const gf_plugin_host *host); /* registers the plugin's kernels */
} gf_plugin_desc;

typedef const gf_plugin_desc *(*gf_plugin_describe_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUFLOW_PLUGIN_H */
