/* start_gate_plugin — a kernel plugin that makes `gpuflow serve` slow to start, for the tests of
 * stop signals during start (edges_test.cpp). Loading it (the service loads its plugins while
 * it starts) opens the FIFO named by $GFSVC_START_GATE and reads it to its end: the service's
 * start goes no further until the test has opened the FIFO's other end and closed it again.
 * Registers no kernels. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <gpuflow_plugin.h>
#include <stdlib.h>
#include <unistd.h>

static gf_status init(const gf_plugin_host *host) {
  (void)host;
  return GF_OK;
}

GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "start_gate", "1.0", init};
  const char *gate = getenv("GFSVC_START_GATE");
  if (gate && *gate) {
    int fd = open(gate, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buffer[64];
      while (read(fd, buffer, sizeof buffer) > 0) {
      }
      close(fd);
    }
  }
  return &desc;
}
