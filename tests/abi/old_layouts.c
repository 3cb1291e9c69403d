/* old_layouts.c: a caller compiled against every published layout of every struct_size-versioned
 * struct of gpuflow.h, run against today's library. The layouts are kept here as they were
 * published (git log -p include/gpuflow.h); a struct whose layout never changed has one published
 * layout, today's, and is used as the header declares it.
 *
 * Each older struct is followed by "trap" bytes that today's library would misread as the
 * appended fields (a kernel name no pool knows, an absurd device list and limit): an input struct
 * read past its struct_size makes a call fail, and an output struct written past it changes the
 * bytes after it. Exit status 0 on success; each failed check is printed.
 *
 * When a field is appended to a struct in gpuflow.h, add today's layout here as the newest older
 * one (and GF_LAYOUT_END in src/capi/layouts.hpp). */
#define _POSIX_C_SOURCE 200809L
#include <gpuflow.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_OK(call)                                                                      \
  do {                                                                                      \
    gf_status s_ = (call);                                                                  \
    if (s_ != GF_OK) {                                                                      \
      fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, gf_status_name(s_), \
              gf_last_error());                                                             \
      ++failures;                                                                           \
    }                                                                                       \
  } while (0)

/* Bytes that follow an older struct: pointers to a string no pool knows as a kernel, and sizes no
 * pool accepts. */
#define TRAP_WORDS 8
static const char trap_string[] = "trap: read past struct_size";
typedef union trap {
  const void *pointer[TRAP_WORDS];
  unsigned char bytes[TRAP_WORDS * sizeof(void *)];
} trap;

static void fill_trap(trap *t) {
  for (int i = 0; i < TRAP_WORDS; ++i) t->pointer[i] = trap_string;
}

static int trap_intact(const trap *t) {
  for (int i = 0; i < TRAP_WORDS; ++i) {
    if (t->pointer[i] != trap_string) return 0;
  }
  return 1;
}

/* ---- gf_pool_config ------------------------------------------------------------------------ */

/* Published first (5e04063, "Public C ABI header"); devices, device_count, device_memory_limit and
 * spill_threshold were appended in c0b3ce1. */
typedef struct pool_config_v0 {
  uint32_t struct_size;
  gf_backend backend;
  int32_t cpu_workers;
  int32_t emulated_devices;
  uint64_t emulated_device_memory;
  double emulated_bandwidth;
  uint32_t gpu_worker_threads;
  const gf_resource *cpu_worker_labels;
  uint32_t cpu_worker_label_count;
  const gf_resource *gpu_worker_labels;
  uint32_t gpu_worker_label_count;
} pool_config_v0;

static gf_pool *old_pool(void) {
  struct {
    pool_config_v0 c;
    trap t;
  } v0;
  memset(&v0, 0, sizeof v0);
  fill_trap(&v0.t);
  v0.c.struct_size = sizeof v0.c;
  v0.c.backend = GF_BACKEND_HOST;
  v0.c.cpu_workers = 1;
  v0.c.emulated_devices = 1;
  v0.c.emulated_device_memory = 1u << 20;
  v0.c.emulated_bandwidth = -1;
  gf_pool *pool = NULL;
  CHECK_OK(gf_pool_create(&pool, (const gf_pool_config *)&v0.c));
  CHECK(trap_intact(&v0.t));
  return pool;
}

/* 0.1's last layout: endpoint was appended in 0.2. */
typedef struct pool_config_v1 {
  pool_config_v0 v0;
  const int32_t *devices;
  uint32_t device_count;
  uint64_t device_memory_limit;
  double spill_threshold;
} pool_config_v1;

static int pool_from_v1_layout(void) {
  struct {
    pool_config_v1 c;
    trap t;
  } v1;
  memset(&v1, 0, sizeof v1);
  fill_trap(&v1.t);
  v1.c.v0.struct_size = sizeof v1.c;
  v1.c.v0.backend = GF_BACKEND_HOST;
  v1.c.v0.cpu_workers = 1;
  v1.c.v0.emulated_devices = 1;
  v1.c.spill_threshold = 0.5;
  gf_pool *pool = NULL;
  CHECK_OK(gf_pool_create(&pool, (const gf_pool_config *)&v1.c));
  CHECK(trap_intact(&v1.t));
  gf_pool_destroy(pool);
  return pool != NULL;
}

/* endpoint's layout: dashboard was appended next (0.3). The trap bytes after it would be read as a
 * dashboard address no pool accepts. */
typedef struct pool_config_v2 {
  pool_config_v1 v1;
  const char *endpoint;
} pool_config_v2;

static int pool_from_v2_layout(void) {
  struct {
    pool_config_v2 c;
    trap t;
  } v2;
  memset(&v2, 0, sizeof v2);
  fill_trap(&v2.t);
  v2.c.v1.v0.struct_size = sizeof v2.c;
  v2.c.v1.v0.backend = GF_BACKEND_HOST;
  v2.c.v1.v0.cpu_workers = 1;
  v2.c.v1.v0.emulated_devices = 1;
  v2.c.endpoint = "embedded";
  gf_pool *pool = NULL;
  CHECK_OK(gf_pool_create(&pool, (const gf_pool_config *)&v2.c));
  CHECK(trap_intact(&v2.t));
  const char *url = NULL;
  CHECK(gf_pool_dashboard_url(&url, pool) == GF_ERR_NOT_FOUND);
  gf_pool_destroy(pool);
  return pool != NULL;
}

/* 0.5's last layout: token_file was appended in 0.6. The trap bytes after it would be read as a
 * token file path that does not exist. */
typedef struct pool_config_v3 {
  pool_config_v2 v2;
  const char *dashboard;
} pool_config_v3;

static int pool_from_v3_layout(const char *endpoint) {
  struct {
    pool_config_v3 c;
    trap t;
  } v3;
  memset(&v3, 0, sizeof v3);
  fill_trap(&v3.t);
  v3.c.v2.v1.v0.struct_size = sizeof v3.c;
  v3.c.v2.v1.v0.backend = GF_BACKEND_HOST;
  v3.c.v2.v1.v0.cpu_workers = 1;
  v3.c.v2.v1.v0.emulated_devices = 1;
  v3.c.v2.endpoint = endpoint;
  gf_pool *pool = NULL;
  gf_status status = gf_pool_create(&pool, (const gf_pool_config *)&v3.c);
  CHECK(trap_intact(&v3.t));
  if (status != GF_OK) return 0;
  gf_pool_destroy(pool);
  return 1;
}

/* ---- output structs: one published layout each (today's) ----------------------------------- */

/* Calls `call` on an output struct of type T followed by a trap, and checks the trap. */
#define OUTPUT(T, INIT, var, call)        \
  do {                                    \
    struct {                              \
      T s;                                \
      trap t;                             \
    } out_ = {INIT, {{0}}};               \
    fill_trap(&out_.t);                   \
    T *var = &out_.s;                     \
    CHECK_OK(call);                       \
    CHECK(trap_intact(&out_.t));          \
    CHECK(var->struct_size == sizeof(T)); \
    result_##var = out_.s;                \
  } while (0)

static void check_pool_outputs(gf_pool *pool) {
  gf_worker_info result_w;
  OUTPUT(gf_worker_info, GF_WORKER_INFO_INIT, w, gf_pool_worker_info(w, pool, 1));
  CHECK(result_w.kind == GF_WORKER_GPU && result_w.device == 0 && result_w.emulated == 1);
  gf_ledger_entry result_e;
  OUTPUT(gf_ledger_entry, GF_LEDGER_ENTRY_INIT, e, gf_pool_ledger_lookup(e, pool, 0, "cpu"));
  CHECK(result_e.capacity == 1.0);
  OUTPUT(gf_ledger_entry, GF_LEDGER_ENTRY_INIT, e, gf_pool_ledger_entry(e, pool, 0, 0));
  gf_device_info result_d;
  OUTPUT(gf_device_info, GF_DEVICE_INFO_INIT, d, gf_pool_device_info(d, pool, 0));
  /* The v0 pool config had no device_memory_limit: the default (the emulated capacity) holds. */
  CHECK(result_d.pool_memory == (1u << 20));
  gf_device_memory result_m;
  OUTPUT(gf_device_memory, GF_DEVICE_MEMORY_INIT, m, gf_pool_device_memory(m, pool, 0));
  CHECK(result_m.capacity == (1u << 20));
}

/* ---- gf_task_desc ---------------------------------------------------------------------------- */

/* Published first (5e04063): through after_count. */
#define TASK_DESC_V0_FIELDS        \
  uint32_t struct_size;            \
  const char *name;                \
  gf_task_fn cpu_fn;               \
  gf_task_fn gpu_fn;               \
  void *user_data;                 \
  gf_destroy_fn user_data_destroy; \
  const gf_resource *resources;    \
  uint32_t resource_count;         \
  int32_t priority;                \
  uint32_t retries;                \
  const gf_data *inputs;           \
  uint32_t input_count;            \
  const gf_data *outputs;          \
  uint32_t output_count;           \
  const gf_task *after;            \
  uint32_t after_count;

typedef struct task_desc_v0 {
  TASK_DESC_V0_FIELDS
} task_desc_v0;

/* c0b3ce1 appended kernel and command (graphs as files); 9f02c64 then appended cost_key. */
typedef struct task_desc_v1 {
  TASK_DESC_V0_FIELDS
  const char *kernel;
  const struct gf_command_desc *command;
} task_desc_v1;

/* The body of every task here: its output 0 gets the int64 in user_data. Environment and
 * kernel/command structs are checked inside. */
static int write_value(gf_task_ctx *ctx, void *user_data) {
  gf_task_env result_env;
  OUTPUT(gf_task_env, GF_TASK_ENV_INIT, env, gf_task_ctx_env(env, ctx));
  CHECK(result_env.kind == GF_WORKER_CPU && result_env.attempt == 1);
  void *out = NULL;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(int64_t)) != GF_OK) return 1;
  memcpy(out, user_data, sizeof(int64_t));
  return 0;
}

static const int64_t value_v0 = 100, value_v1 = 101, value_today = 102;

static void run_old_tasks(gf_pool *pool) {
  gf_graph *graph = NULL;
  CHECK_OK(gf_graph_create(&graph));
  gf_resource cpu = {"cpu", 1};
  gf_data out[3];
  for (int i = 0; i < 3; ++i) {
    /* gf_buffer_desc: one published layout (today's). */
    struct {
      gf_buffer_desc b;
      trap t;
    } buffer = {GF_BUFFER_DESC_INIT, {{0}}};
    fill_trap(&buffer.t);
    buffer.b.size = sizeof(int64_t);
    CHECK_OK(gf_graph_add_buffer(&out[i], graph, &buffer.b));
  }

  struct {
    task_desc_v0 d;
    trap t;
  } v0;
  memset(&v0, 0, sizeof v0);
  fill_trap(&v0.t);
  v0.d.struct_size = sizeof v0.d;
  v0.d.name = "v0";
  v0.d.cpu_fn = write_value;
  v0.d.user_data = (void *)&value_v0;
  v0.d.resources = &cpu;
  v0.d.resource_count = 1;
  v0.d.outputs = &out[0];
  v0.d.output_count = 1;
  gf_task t0, t1, t2;
  CHECK_OK(gf_graph_add_task(&t0, graph, (const gf_task_desc *)&v0.d));

  struct {
    task_desc_v1 d;
    trap t;
  } v1;
  memset(&v1, 0, sizeof v1);
  fill_trap(&v1.t);
  v1.d.struct_size = sizeof v1.d;
  v1.d.name = "v1";
  v1.d.cpu_fn = write_value;
  v1.d.user_data = (void *)&value_v1;
  v1.d.outputs = &out[1];
  v1.d.output_count = 1;
  v1.d.after = &t0;
  v1.d.after_count = 1;
  CHECK_OK(gf_graph_add_task(&t1, graph, (const gf_task_desc *)&v1.d));

  gf_task_desc today = GF_TASK_DESC_INIT;
  today.name = "today";
  today.cpu_fn = write_value;
  today.user_data = (void *)&value_today;
  today.outputs = &out[2];
  today.output_count = 1;
  CHECK_OK(gf_graph_add_task(&t2, graph, &today));

  /* gf_submit_options: the layout before `where` (0.4), then today's. */
  struct {
    struct {
      uint32_t struct_size;
      gf_run_callback on_complete;
      void *user_data;
    } o;
    trap t;
  } options_v0 = {{0, NULL, NULL}, {{0}}};
  options_v0.o.struct_size = sizeof options_v0.o;
  fill_trap(&options_v0.t);
  gf_run *run = NULL;
  CHECK_OK(gf_graph_submit(&run, pool, graph, (const gf_submit_options *)&options_v0.o));
  gf_run_where where = GF_RUN_IN_SERVICE;
  CHECK_OK(gf_run_where_get(&where, run));
  CHECK(where == GF_RUN_IN_PROCESS);
  CHECK_OK(gf_run_wait(run, 60000));
  gf_run_destroy(run);
  run = NULL;

  struct {
    gf_submit_options o;
    trap t;
  } options = {GF_SUBMIT_OPTIONS_INIT, {{0}}};
  fill_trap(&options.t);
  CHECK_OK(gf_graph_submit(&run, pool, graph, &options.o));
  CHECK_OK(gf_run_wait(run, 60000));
  const int64_t expected[3] = {value_v0, value_v1, value_today};
  for (int i = 0; i < 3; ++i) {
    int64_t got = -1;
    uint64_t size = 0;
    CHECK_OK(gf_run_fetch(&size, run, out[i], &got, sizeof got));
    CHECK(got == expected[i]);
  }
  gf_run_stats result_s;
  OUTPUT(gf_run_stats, GF_RUN_STATS_INIT, s, gf_run_stats_get(s, run));
  CHECK(result_s.tasks == 3 && result_s.succeeded == 3);
  gf_run_destroy(run);
  gf_graph_destroy(graph);
}

/* ---- gf_kernel_desc, gf_command_desc: one published layout each (today's) ------------------ */

static void register_kernel(gf_pool *pool) {
  struct {
    gf_kernel_desc k;
    trap t;
  } kernel = {GF_KERNEL_DESC_INIT, {{0}}};
  fill_trap(&kernel.t);
  kernel.k.name = "old_layouts.write";
  kernel.k.cpu_fn = write_value;
  kernel.k.user_data = (void *)&value_v0;
  CHECK_OK(gf_pool_register_kernel(pool, &kernel.k));

  gf_graph *graph = NULL;
  CHECK_OK(gf_graph_create(&graph));
  struct {
    gf_command_desc c;
    trap t;
  } command = {GF_COMMAND_DESC_INIT, {{0}}};
  fill_trap(&command.t);
  const char *argv[] = {"true"};
  command.c.argv = argv;
  command.c.argc = 1;
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = "command";
  d.command = &command.c;
  gf_task t;
  CHECK_OK(gf_graph_add_task(&t, graph, &d));
  gf_run *run = NULL;
  CHECK_OK(gf_graph_submit(&run, pool, graph, NULL));
  CHECK_OK(gf_run_wait(run, 60000));
  gf_run_destroy(run);
  gf_graph_destroy(graph);
}

/* ---- gf_service_config ---------------------------------------------------------------------- */

/* 0.7's layout: listen_fd was appended in 0.8. The trap bytes after it would be read as a
 * listen_fd that is no socket, and the start refused. */
typedef struct service_config_v4 {
  uint32_t struct_size;
  const gf_pool_config *pool;
  const char *socket_path;
  const char *group;
  double usage_half_life_s;
  double client_gpu_cap;
  double user_gpu_cap;
  gf_log_fn log;
  void *log_user_data;
  const char *user_weights;
  const char *dashboard;
  const char *const *plugins;
  uint32_t plugin_count;
  const char *listen;
  const char *token_file;
  double job_kill_grace_s;
} service_config_v4;

static void service_from_v4_layout(void) {
  char dir[] = "/tmp/gf-old-layouts-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  char socket_path[64];
  snprintf(socket_path, sizeof socket_path, "%s/gf.sock", dir);
  gf_pool_config pool = GF_POOL_CONFIG_INIT;
  pool.backend = GF_BACKEND_HOST;
  pool.emulated_devices = 1;
  struct {
    service_config_v4 c;
    trap t;
  } v4;
  memset(&v4, 0, sizeof v4);
  fill_trap(&v4.t);
  v4.c.struct_size = sizeof v4.c;
  v4.c.pool = &pool;
  v4.c.socket_path = socket_path;
  v4.c.user_gpu_cap = 1;
  gf_service *service = NULL;
  CHECK_OK(gf_service_start(&service, (const gf_service_config *)&v4.c));
  CHECK(trap_intact(&v4.t));
  if (service) {
    char endpoint[80];
    snprintf(endpoint, sizeof endpoint, "unix://%s", socket_path);
    CHECK(strcmp(gf_service_endpoint(service), endpoint) == 0);
    v4.c.user_gpu_cap = 2;
    CHECK_OK(gf_service_update_policy(service, (const gf_service_config *)&v4.c));
    CHECK(trap_intact(&v4.t));
    gf_service_stop(service);
  }
  CHECK(remove(dir) == 0); /* the service removed its own socket: the directory is empty */
}

int main(void) {
  service_from_v4_layout();
  gf_pool *pool = old_pool();
  if (!pool) return 1;
  CHECK(pool_from_v1_layout());
  CHECK(pool_from_v2_layout());
  CHECK(pool_from_v3_layout("embedded"));
  /* A remote endpoint with no token anywhere: the library must not take the trap for one. */
  unsetenv("GPUFLOW_TOKEN_FILE");
  CHECK(!pool_from_v3_layout("tcp://127.0.0.1:1"));
  CHECK(strstr(gf_last_error(), "GPUFLOW_TOKEN_FILE") != NULL);
  check_pool_outputs(pool);
  run_old_tasks(pool);
  register_kernel(pool);
  gf_pool_destroy(pool);
  if (failures) {
    fprintf(stderr, "old_layouts: %d check(s) failed\n", failures);
    return 1;
  }
  printf("old_layouts: every published layout accepted\n");
  return 0;
}
