/* A well-formed test plugin: registers "test.double" (doubles an 8-byte int64 input). */
#include <gpuflow_plugin.h>
#include <string.h>

static int twice(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  const void *in;
  uint64_t size;
  void *out;
  if (gf_task_ctx_input(&in, &size, ctx, 0) != GF_OK || size != 8) return 1;
  if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
  int64_t v;
  memcpy(&v, in, 8);
  v *= 2;
  memcpy(out, &v, 8);
  return 0;
}

static gf_status init(const gf_plugin_host *host) {
  gf_kernel_desc k = GF_KERNEL_DESC_INIT;
  k.name = "test.double";
  k.cpu_fn = twice;
  k.gpu_fn = twice;
  return host->register_kernel(host, &k);
}

GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "test-good", "1", init};
  return &desc;
}
