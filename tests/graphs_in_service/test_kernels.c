/* test_kernels — a kernel plugin for the tests of graphs that run inside the service
 * (graph_in_service_test.cpp). Every kernel has a CPU and a GPU body (the host backend runs GPU
 * bodies on host memory, which is all these tests use). Kernels:
 *   test.add    inputs: any number of 8-byte int64s; output 0: 8 bytes, their sum.
 *   test.scale  input 0: an int64; input 1: an int64 factor; output 0: 8 bytes, the product.
 *   test.fail   always fails, with the message "test.fail: deliberate failure in TASK_NAME".
 *   test.wait   input 0: the text "MS [STARTED [AWAIT]]". Creates the file STARTED (when given)
 *               once it runs; then waits in steps of 2 ms, at most MS milliseconds, and
 *               - without AWAIT: succeeds after MS ms; fails at once when the run is cancelled;
 *               - with AWAIT: succeeds as soon as the file AWAIT exists, fails when it did not
 *                 appear within MS ms or the run is cancelled.
 *               Output 0, when declared: 8 bytes, the milliseconds it waited.
 *   test.noop   needs no inputs; every output it declares must be 8 bytes (or unsized) and is
 *               written as eight zero bytes.
 *   test.big    input 0: the text "SIZE SEED"; output 0: SIZE bytes of test_pattern_byte(i, SEED)
 *               (the test computes the same function to check what comes back).
 *   test.value  output 0: an opaque value slot, set to a malloc'd int64 holding 42.
 * Build: a MODULE exporting gf_plugin_describe (tests/transport/CMakeLists.txt). */
#include <gpuflow_plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Byte i of test.big's output for `seed`: one splitmix64 finaliser per 8-byte word, so a block
 * moved, repeated or dropped anywhere in the buffer shows. graph_in_service_test.cpp has a copy. */
static uint8_t test_pattern_byte(uint64_t i, uint64_t seed) {
  uint64_t z = (i / 8) + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (uint8_t)(z >> (8 * (i % 8)));
}

static int fail_with(gf_task_ctx *ctx, const char *message) {
  gf_task_ctx_fail(ctx, message);
  return 1;
}

static int read_int64(gf_task_ctx *ctx, uint32_t index, int64_t *out) {
  const void *p;
  uint64_t size;
  if (gf_task_ctx_input(&p, &size, ctx, index) != GF_OK || size != sizeof(int64_t)) return -1;
  memcpy(out, p, sizeof *out);
  return 0;
}

static int read_text(gf_task_ctx *ctx, uint32_t index, char *buf, size_t cap) {
  const void *p;
  uint64_t size;
  if (gf_task_ctx_input(&p, &size, ctx, index) != GF_OK) return -1;
  if (size >= cap) return -1;
  memcpy(buf, p, (size_t)size);
  buf[size] = '\0';
  return 0;
}

static int write_int64(gf_task_ctx *ctx, uint32_t index, int64_t value) {
  void *out;
  if (gf_task_ctx_output(&out, ctx, index, sizeof value) != GF_OK) return -1;
  memcpy(out, &value, sizeof value);
  return 0;
}

static int add(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  int64_t total = 0;
  for (uint32_t i = 0;; ++i) {
    const void *p;
    uint64_t size;
    if (gf_task_ctx_input(&p, &size, ctx, i) != GF_OK) break; /* past the last input */
    int64_t v;
    if (read_int64(ctx, i, &v) != 0) {
      return fail_with(ctx, "test.add: every input must be one 8-byte int64");
    }
    total += v;
  }
  if (write_int64(ctx, 0, total) != 0) return fail_with(ctx, "test.add: output 0 is not 8 bytes");
  return 0;
}

static int scale(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  int64_t v, factor;
  if (read_int64(ctx, 0, &v) != 0 || read_int64(ctx, 1, &factor) != 0) {
    return fail_with(ctx, "test.scale: inputs are two 8-byte int64s");
  }
  if (write_int64(ctx, 0, v * factor) != 0) {
    return fail_with(ctx, "test.scale: output 0 is not 8 bytes");
  }
  return 0;
}

static int always_fail(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  gf_task_env env = GF_TASK_ENV_INIT;
  char message[300];
  snprintf(message, sizeof message, "test.fail: deliberate failure in %s",
           gf_task_ctx_env(&env, ctx) == GF_OK && env.task_name ? env.task_name : "?");
  return fail_with(ctx, message);
}

static int file_exists(const char *path) {
  return access(path, F_OK) == 0;
}

static int wait_kernel(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  char text[2048], started[1024] = "", await[1024] = "";
  long ms = 0;
  if (read_text(ctx, 0, text, sizeof text) != 0 ||
      sscanf(text, "%ld %1023s %1023s", &ms, started, await) < 1 || ms < 0) {
    return fail_with(ctx, "test.wait: input 0 must be the text \"MS [STARTED [AWAIT]]\"");
  }
  if (started[0]) {
    FILE *f = fopen(started, "w");
    if (!f) return fail_with(ctx, "test.wait: cannot create the STARTED file");
    fclose(f);
  }
  long waited = 0;
  int seen = 0;
  while (waited < ms) {
    if (gf_task_ctx_cancelled(ctx)) return fail_with(ctx, "test.wait: cancelled");
    if (await[0] && file_exists(await)) {
      seen = 1;
      break;
    }
    struct timespec step = {0, 2 * 1000 * 1000};
    nanosleep(&step, NULL);
    waited += 2;
  }
  if (await[0] && !seen && !file_exists(await)) {
    char message[1200];
    snprintf(message, sizeof message, "test.wait: %s did not appear within %ld ms", await, ms);
    return fail_with(ctx, message);
  }
  write_int64(ctx, 0, waited); /* no output declared: nothing to write */
  return 0;
}

static int noop(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  /* Stops at the first output that is not 8 bytes (past the last one, or sized otherwise). */
  for (uint32_t i = 0; write_int64(ctx, i, 0) == 0; ++i) {
  }
  return 0;
}

static int big(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  char text[128];
  unsigned long long size, seed;
  if (read_text(ctx, 0, text, sizeof text) != 0 || sscanf(text, "%llu %llu", &size, &seed) != 2) {
    return fail_with(ctx, "test.big: input 0 must be the text \"SIZE SEED\"");
  }
  void *out;
  if (gf_task_ctx_output(&out, ctx, 0, size) != GF_OK) {
    return fail_with(ctx, "test.big: output 0 cannot hold SIZE bytes");
  }
  uint8_t *bytes = (uint8_t *)out;
  for (uint64_t i = 0; i < size; ++i) bytes[i] = test_pattern_byte(i, seed);
  return 0;
}

static int value(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  int64_t *v = (int64_t *)malloc(sizeof *v);
  if (!v) return fail_with(ctx, "test.value: out of memory");
  *v = 42;
  if (gf_task_ctx_set_value(ctx, 0, v, free, sizeof *v) != GF_OK) {
    free(v);
    return fail_with(ctx, "test.value: output 0 must be a value slot");
  }
  return 0;
}

static gf_status init(const gf_plugin_host *host) {
  static const struct {
    const char *name;
    gf_task_fn fn;
  } kernels[] = {{"test.add", add},          {"test.scale", scale}, {"test.fail", always_fail},
                 {"test.wait", wait_kernel}, {"test.noop", noop},   {"test.big", big},
                 {"test.value", value}};
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; ++i) {
    gf_kernel_desc k = GF_KERNEL_DESC_INIT;
    k.name = kernels[i].name;
    k.cpu_fn = kernels[i].fn;
    k.gpu_fn = kernels[i].fn;
    gf_status status = host->register_kernel(host, &k);
    if (status != GF_OK) return status;
  }
  return GF_OK;
}

GF_PLUGIN_EXPORT const gf_plugin_desc *gf_plugin_describe(void) {
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "test", "1.0", init};
  return &desc;
}
