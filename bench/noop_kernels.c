/* noop_kernels — a kernel plugin for benchmarks: "bench.noop" does nothing, on CPU or GPU
 * workers. Lets a graph document name a no-op body, so a graph can run inside the service
 * (service_graph_bench.c). */
#include <gpuflow_plugin.h>

static int noop(gf_task_ctx *ctx, void *user_data) {
  (void)ctx;
  (void)user_data;
  return 0;
}

static gf_status init(const gf_plugin_host *host) {
  gf_kernel_desc k = GF_KERNEL_DESC_INIT;
  k.name = "bench.noop";
  k.cpu_fn = noop;
  k.gpu_fn = noop;
  return host->register_kernel(host, &k);
}

GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "bench-noop", "1.0", init};
  return &desc;
}
