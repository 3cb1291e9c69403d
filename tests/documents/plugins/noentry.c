/* A shared library that is not a gpuflow plugin: no gf_plugin_describe. */
#include <gpuflow_plugin.h>

GF_PLUGIN_EXPORT int not_a_plugin(void);
GF_PLUGIN_EXPORT int not_a_plugin(void) {
  return 42;
}
