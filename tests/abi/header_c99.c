/* header_c99.c: gpuflow.h must compile as strict C99 (-std=c99 -pedantic -Werror -Wall -Wextra),
 * and every _INIT macro must produce the same values as its gf_*_init function.
 * Exit status 0 on success; each mismatch is printed. Fields are compared one by one (padding
 * bytes are unspecified in C, so a memcmp of whole structs would not be meaningful). */
#include <gpuflow.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* Compares one field of a macro-initialised struct with the function-initialised one. */
#define SAME(a, b, field) CHECK(memcmp(&(a).field, &(b).field, sizeof((a).field)) == 0)

static void check_pool_config(void) {
  gf_pool_config m = GF_POOL_CONFIG_INIT;
  gf_pool_config f;
  memset(&f, 0xA5, sizeof f);
  gf_pool_config_init(&f, sizeof f);
  CHECK(m.struct_size == sizeof(gf_pool_config));
  SAME(m, f, struct_size);
  SAME(m, f, backend);
  SAME(m, f, cpu_workers);
  SAME(m, f, emulated_devices);
  SAME(m, f, emulated_device_memory);
  SAME(m, f, emulated_bandwidth);
  SAME(m, f, gpu_worker_threads);
  SAME(m, f, cpu_worker_labels);
  SAME(m, f, cpu_worker_label_count);
  SAME(m, f, gpu_worker_labels);
  SAME(m, f, gpu_worker_label_count);
  CHECK(f.backend == GF_BACKEND_AUTO);
  CHECK(f.cpu_workers == 0 && f.emulated_devices == 0 && f.gpu_worker_threads == 0);
  CHECK(f.cpu_worker_labels == NULL && f.gpu_worker_labels == NULL);
}

static void check_buffer_desc(void) {
  gf_buffer_desc m = GF_BUFFER_DESC_INIT;
  gf_buffer_desc f;
  memset(&f, 0xA5, sizeof f);
  gf_buffer_desc_init(&f, sizeof f);
  CHECK(m.struct_size == sizeof(gf_buffer_desc));
  SAME(m, f, struct_size);
  SAME(m, f, name);
  SAME(m, f, size);
  SAME(m, f, flags);
  CHECK(f.name == NULL && f.size == 0 && f.flags == 0);
}

static void check_task_desc(void) {
  gf_task_desc m = GF_TASK_DESC_INIT;
  gf_task_desc f;
  memset(&f, 0xA5, sizeof f);
  gf_task_desc_init(&f, sizeof f);
  CHECK(m.struct_size == sizeof(gf_task_desc));
  SAME(m, f, struct_size);
  SAME(m, f, name);
  SAME(m, f, cpu_fn);
  SAME(m, f, gpu_fn);
  SAME(m, f, user_data);
  SAME(m, f, user_data_destroy);
  SAME(m, f, resources);
  SAME(m, f, resource_count);
  SAME(m, f, priority);
  SAME(m, f, retries);
  SAME(m, f, inputs);
  SAME(m, f, input_count);
  SAME(m, f, outputs);
  SAME(m, f, output_count);
  SAME(m, f, after);
  SAME(m, f, after_count);
  CHECK(f.cpu_fn == NULL && f.gpu_fn == NULL && f.priority == 0 && f.retries == 0);
}

static void check_submit_options(void) {
  gf_submit_options m = GF_SUBMIT_OPTIONS_INIT;
  gf_submit_options f;
  memset(&f, 0xA5, sizeof f);
  gf_submit_options_init(&f, sizeof f);
  CHECK(m.struct_size == sizeof(gf_submit_options));
  SAME(m, f, struct_size);
  SAME(m, f, on_complete);
  SAME(m, f, user_data);
  CHECK(f.on_complete == NULL && f.user_data == NULL);
}

static void check_value_ops(void) {
  gf_value_ops m = GF_VALUE_OPS_INIT;
  gf_value_ops f;
  memset(&f, 0xA5, sizeof f);
  gf_value_ops_init(&f, sizeof f);
  CHECK(m.struct_size == sizeof(gf_value_ops));
  SAME(m, f, struct_size);
  SAME(m, f, spill);
  SAME(m, f, unspill);
  SAME(m, f, user_data);
  CHECK(f.spill == NULL && f.unspill == NULL && f.user_data == NULL);
}

static void check_output_structs(void) {
  /* Structs filled by the library have INIT macros but no init function: check their sizes. */
  gf_worker_info wi = GF_WORKER_INFO_INIT;
  gf_ledger_entry le = GF_LEDGER_ENTRY_INIT;
  gf_run_stats rs = GF_RUN_STATS_INIT;
  gf_task_env te = GF_TASK_ENV_INIT;
  CHECK(wi.struct_size == sizeof(gf_worker_info));
  CHECK(le.struct_size == sizeof(gf_ledger_entry));
  CHECK(rs.struct_size == sizeof(gf_run_stats));
  CHECK(te.struct_size == sizeof(gf_task_env));
  CHECK(te.device == -1);
}

static void check_version(void) {
  char expected[64];
  CHECK(gf_version() == GF_VERSION);
  CHECK(GF_VERSION == ((GF_VERSION_MAJOR << 16) | (GF_VERSION_MINOR << 8) | GF_VERSION_PATCH));
  snprintf(expected, sizeof expected, "%d.%d.%d", GF_VERSION_MAJOR, GF_VERSION_MINOR,
           GF_VERSION_PATCH);
  CHECK(gf_version_string() != NULL && strcmp(gf_version_string(), expected) == 0);
}

static void check_pool_from_c(void) {
  /* The static inline gf_pool_create must work from C. */
  gf_pool *pool = NULL;
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  uint32_t n = 0;
  c.backend = GF_BACKEND_HOST;
  c.cpu_workers = 1;
  c.emulated_devices = -1;
  CHECK(gf_pool_create(&pool, &c) == GF_OK);
  CHECK(gf_pool_worker_count(&n, pool) == GF_OK && n == 1);
  gf_pool_destroy(pool);
  CHECK(gf_last_error() != NULL);
}

int main(void) {
  check_pool_config();
  check_buffer_desc();
  check_task_desc();
  check_submit_options();
  check_value_ops();
  check_output_structs();
  check_version();
  check_pool_from_c();
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  else
    printf("header_c99: all checks passed\n");
  return failures ? 1 : 0;
}
