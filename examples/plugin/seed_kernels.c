/* seed_kernels — a gpuflow kernel plugin for the seed workload of Dask's GPU blog post,
 *
 *     x = da.random.RandomState().normal(10, 1, size=(N, N), chunks=(C, C))
 *     (x + 1)[::2, ::2].sum()
 *
 * as a graph document can name it (examples/json/seed.json). Kernels:
 *   seed.chunk  input 0: the text "ROW0 COL0 ROWS COLS SEED" (a literal input of the document);
 *               output 0: 8 bytes, the sum of normal(10, 1) + 1 over the chunk's elements whose
 *               global row and column are both even.
 *   seed.sum    inputs: any number of 8-byte doubles; output 0: their sum.
 *   seed.check  input 0: the total; input 1: the text "EXPECTED TOLERANCE"; output 0: the total
 *               again (keep it to read it back); fails when the total is off.
 * Every kernel has a CPU and a GPU body (the host backend runs GPU bodies on host memory).
 * Build: a shared library exporting gf_plugin_describe (examples/CMakeLists.txt); load it with
 * gf_pool_load_plugin or `gpuflow run GRAPH --plugin seed_kernels.so`. */
#include <gpuflow_plugin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a counter-seeded xoshiro256++ stream and Marsaglia's polar method ---- */

typedef struct rng {
  uint64_t s[4];
  double spare;
  int has_spare;
} rng;

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(rng *r) {
  uint64_t *s = r->s;
  const uint64_t result = rotl(s[0] + s[3], 23) + s[0];
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

static double uniform(rng *r) { /* in (-1, 1) */
  return (double)(next_u64(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static double normal(rng *r) {
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u, v, s;
  do {
    u = uniform(r);
    v = uniform(r);
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  double f = sqrt(-2.0 * log(s) / s);
  r->spare = v * f;
  r->has_spare = 1;
  return u * f;
}

/* ---- kernels ---- */

static int read_text(gf_task_ctx *ctx, uint32_t index, char *buf, size_t cap) {
  const void *p;
  uint64_t size;
  if (gf_task_ctx_input(&p, &size, ctx, index) != GF_OK) return -1;
  if (size >= cap) size = cap - 1;
  memcpy(buf, p, (size_t)size);
  buf[size] = '\0';
  return 0;
}

static int write_double(gf_task_ctx *ctx, double value) {
  void *out;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(double)) != GF_OK) return 1;
  memcpy(out, &value, sizeof value);
  return 0;
}

static int chunk(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  char text[128];
  unsigned long long row0, col0, rows, cols, seed;
  if (read_text(ctx, 0, text, sizeof text) != 0 ||
      sscanf(text, "%llu %llu %llu %llu %llu", &row0, &col0, &rows, &cols, &seed) != 5) {
    gf_task_ctx_fail(ctx, "seed.chunk: input 0 must be the text \"ROW0 COL0 ROWS COLS SEED\"");
    return 1;
  }
  uint64_t state = seed ^ (row0 * 0x100000001B3ull) ^ (col0 * 0xC2B2AE3D27D4EB4Full);
  rng r = {{0, 0, 0, 0}, 0.0, 0};
  for (int i = 0; i < 4; ++i) r.s[i] = splitmix64(&state);
  double sum = 0;
  for (unsigned long long i = 0; i < rows; ++i) {
    for (unsigned long long j = 0; j < cols; ++j) {
      double x = normal(&r) + 10.0 + 1.0; /* every element is drawn, as in the real workload */
      if ((row0 + i) % 2 == 0 && (col0 + j) % 2 == 0) sum += x;
    }
    if (gf_task_ctx_cancelled(ctx)) return 1;
  }
  return write_double(ctx, sum);
}

static int sum_inputs(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  double total = 0;
  for (uint32_t i = 0;; ++i) {
    const void *p;
    uint64_t size;
    if (gf_task_ctx_input(&p, &size, ctx, i) != GF_OK) break; /* past the last input */
    if (size != sizeof(double)) {
      gf_task_ctx_fail(ctx, "seed.sum: every input must be one 8-byte double");
      return 1;
    }
    double v;
    memcpy(&v, p, sizeof v);
    total += v;
  }
  return write_double(ctx, total);
}

static int check(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  const void *p;
  uint64_t size;
  double total, expected, tolerance;
  char text[128];
  if (gf_task_ctx_input(&p, &size, ctx, 0) != GF_OK || size != sizeof(double) ||
      read_text(ctx, 1, text, sizeof text) != 0 ||
      sscanf(text, "%lf %lf", &expected, &tolerance) != 2) {
    gf_task_ctx_fail(ctx, "seed.check: inputs are the total and the text \"EXPECTED TOLERANCE\"");
    return 1;
  }
  memcpy(&total, p, sizeof total);
  if (!(fabs(total - expected) <= tolerance)) {
    char message[200];
    snprintf(message, sizeof message, "seed.check: the sum is %.3f, expected %.3f +- %.3f", total,
             expected, tolerance);
    gf_task_ctx_fail(ctx, message);
    return 1;
  }
  return write_double(ctx, total);
}

static gf_status init(const gf_plugin_host *host) {
  static const struct {
    const char *name;
    gf_task_fn fn;
  } kernels[] = {{"seed.chunk", chunk}, {"seed.sum", sum_inputs}, {"seed.check", check}};
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
  static const gf_plugin_desc desc = {GF_PLUGIN_ABI_VERSION, "seed", "1.0", init};
  return &desc;
}
