/* A plugin built for a plugin ABI version this gpuflow does not load. */
#include <gpuflow_plugin.h>

static gf_status init(const gf_plugin_host *host) {
  (void)host;
  return GF_ERR_INTERNAL; /* never called */
}

GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION + 998, "test-badabi", "1", init};
  return &desc;
}
