/* A plugin whose init fails with a message. */
#include <gpuflow_plugin.h>

static gf_status init(const gf_plugin_host *host) {
  host->fail(host, "no license for this kernel");
  return GF_ERR_INVALID_ARGUMENT;
}

GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "test-failinit", "1", init};
  return &desc;
}
