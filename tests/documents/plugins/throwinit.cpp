// A C++ plugin whose init throws (after registering one kernel) instead of returning an error.
#include <gpuflow_plugin.h>

#include <stdexcept>

namespace {

int noop(gf_task_ctx *, void *) {
  return 0;
}

gf_status init(const gf_plugin_host *host) {
  gf_kernel_desc k = GF_KERNEL_DESC_INIT;
  k.name = "throwinit.before";
  k.cpu_fn = noop;
  host->register_kernel(host, &k);
  throw std::runtime_error("plugin exploded");
}

}  // namespace

extern "C" GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "test-throwinit", "1", init};
  return &desc;
}
