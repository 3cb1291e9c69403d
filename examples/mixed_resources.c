/* mixed_resources — tasks that ask for different resources, like Dask's annotate example:
 *
 *     data = client.submit(load)                              # any CPU worker
 *     with dask.annotate(resources={"GPU": 1}):
 *         processed = client.submit(process, data)            # needs a GPU
 *     total = client.submit(summarise, processed)             # back on a CPU worker
 *
 * Here: "load" (cpu_fn, cpu=1) fills a buffer with 0..K-1, "square" (gpu_fn only, GPU=1) squares
 * every element on a GPU worker, "sum" (cpu_fn, cpu=1) adds the squares. The program prints which
 * worker ran each task and checks that the GPU task ran on a GPU worker, the CPU tasks on CPU
 * workers, and that the total is sum(i^2) = (K-1)K(2K-1)/6.
 *
 * The pool uses the host backend, whose GPU workers emulate devices in host memory, so the GPU
 * body below is plain C on host pointers. (With the CUDA backend, a gpu_fn gets device pointers
 * and a stream, and would launch a kernel instead.) */
#include <gpuflow.h>

#include <inttypes.h>
#include <stdio.h>

enum { K = 1024 };

#define CHECK(call)                                                  \
  do {                                                               \
    gf_status check_status_ = (call);                                \
    if (check_status_ != GF_OK) {                                    \
      fprintf(stderr, "mixed_resources: %s failed: %s: %s\n", #call, \
              gf_status_name(check_status_), gf_last_error());       \
      goto done;                                                     \
    }                                                                \
  } while (0)

/* Fails the attempt unless the body runs on a worker of the expected kind. */
static int require_kind(gf_task_ctx *ctx, gf_worker_kind expected) {
  gf_task_env env = GF_TASK_ENV_INIT;
  if (gf_task_ctx_env(&env, ctx) != GF_OK) return 1;
  if (env.kind != expected) {
    gf_task_ctx_fail(ctx, "body ran on a worker of the wrong kind");
    return 1;
  }
  return 0;
}

/* load: output 0 = int64[K] holding 0, 1, ..., K-1. */
static int load(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  if (require_kind(ctx, GF_WORKER_CPU)) return 1;
  void *out = NULL;
  if (gf_task_ctx_output(&out, ctx, 0, K * sizeof(int64_t)) != GF_OK) return 1;
  int64_t *values = out;
  for (int64_t i = 0; i < K; i++) values[i] = i;
  return 0;
}

/* square: input 0 = int64[K], output 0 = int64[K] of squares. Device memory (emulated: host). */
static int square(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  if (require_kind(ctx, GF_WORKER_GPU)) return 1;
  const void *in = NULL;
  uint64_t in_size = 0;
  void *out = NULL;
  if (gf_task_ctx_input(&in, &in_size, ctx, 0) != GF_OK) return 1;
  if (in_size != K * sizeof(int64_t)) {
    gf_task_ctx_fail(ctx, "square: input has the wrong size");
    return 1;
  }
  if (gf_task_ctx_output(&out, ctx, 0, in_size) != GF_OK) return 1;
  const int64_t *x = in;
  int64_t *y = out;
  for (int i = 0; i < K; i++) y[i] = x[i] * x[i];
  return 0;
}

/* sum: input 0 = int64[K], output 0 = int64 total. */
static int sum(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  if (require_kind(ctx, GF_WORKER_CPU)) return 1;
  const void *in = NULL;
  uint64_t in_size = 0;
  void *out = NULL;
  if (gf_task_ctx_input(&in, &in_size, ctx, 0) != GF_OK) return 1;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(int64_t)) != GF_OK) return 1;
  const int64_t *x = in;
  int64_t total = 0;
  for (uint64_t i = 0; i < in_size / sizeof(int64_t); i++) total += x[i];
  *(int64_t *)out = total;
  return 0;
}

/* Adds a task with one body, one resource request, at most one input and one output. */
static gf_status add_task(gf_task *out, gf_graph *graph, const char *name, gf_worker_kind kind,
                          gf_task_fn fn, const gf_resource *resource, const gf_data *input,
                          const gf_data *output) {
  gf_task_desc desc = GF_TASK_DESC_INIT;
  desc.name = name;
  if (kind == GF_WORKER_GPU)
    desc.gpu_fn = fn;
  else
    desc.cpu_fn = fn;
  desc.resources = resource;
  desc.resource_count = 1;
  desc.inputs = input;
  desc.input_count = input ? 1 : 0;
  desc.outputs = output;
  desc.output_count = 1;
  return gf_graph_add_task(out, graph, &desc);
}

static gf_status add_buffer(gf_data *out, gf_graph *graph, const char *name, uint64_t size) {
  gf_buffer_desc desc = GF_BUFFER_DESC_INIT;
  desc.name = name;
  desc.size = size;
  return gf_graph_add_buffer(out, graph, &desc);
}

/* Prints where `task` ran; returns 0 when that worker is of kind `expected`. */
static int report(gf_pool *pool, gf_run *run, gf_task task, const char *name,
                  gf_worker_kind expected) {
  uint32_t worker = 0;
  gf_worker_info info = GF_WORKER_INFO_INIT;
  if (gf_run_task_worker(&worker, run, task) != GF_OK ||
      gf_pool_worker_info(&info, pool, worker) != GF_OK) {
    fprintf(stderr, "mixed_resources: cannot tell where %s ran: %s\n", name, gf_last_error());
    return 1;
  }
  int ok = info.kind == expected;
  printf("%-7s ran on worker %u (%s, %s)%s\n", name, worker, info.name,
         info.kind == GF_WORKER_GPU ? "GPU" : "CPU", ok ? "" : "  <-- WRONG KIND");
  return ok ? 0 : 1;
}

int main(void) {
  int exit_code = 1;
  gf_pool *pool = NULL;
  gf_graph *graph = NULL;
  gf_run *run = NULL;

  /* CPU workers (one per core) and GPU workers (2 emulated devices, by default). */
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_HOST;
  CHECK(gf_pool_create(&pool, &config));

  uint32_t workers = 0, cpus = 0, gpus = 0;
  CHECK(gf_pool_worker_count(&workers, pool));
  for (uint32_t w = 0; w < workers; w++) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    CHECK(gf_pool_worker_info(&info, pool, w));
    if (info.kind == GF_WORKER_GPU)
      gpus++;
    else
      cpus++;
  }
  printf("pool: %u CPU workers, %u GPU workers\n", cpus, gpus);

  CHECK(gf_graph_create(&graph));
  gf_data numbers, squares, total;
  CHECK(add_buffer(&numbers, graph, "numbers", K * sizeof(int64_t)));
  CHECK(add_buffer(&squares, graph, "squares", K * sizeof(int64_t)));
  CHECK(add_buffer(&total, graph, "total", sizeof(int64_t)));

  const gf_resource one_cpu = {"cpu", 1.0};
  const gf_resource one_gpu = {"GPU", 1.0};
  gf_task t_load, t_square, t_sum;
  CHECK(add_task(&t_load, graph, "load", GF_WORKER_CPU, load, &one_cpu, NULL, &numbers));
  CHECK(add_task(&t_square, graph, "square", GF_WORKER_GPU, square, &one_gpu, &numbers, &squares));
  CHECK(add_task(&t_sum, graph, "sum", GF_WORKER_CPU, sum, &one_cpu, &squares, &total));

  CHECK(gf_graph_submit(&run, pool, graph, NULL));
  CHECK(gf_run_wait(run, -1));

  int wrong = 0;
  wrong += report(pool, run, t_load, "load", GF_WORKER_CPU);
  wrong += report(pool, run, t_square, "square", GF_WORKER_GPU);
  wrong += report(pool, run, t_sum, "sum", GF_WORKER_CPU);

  int64_t value = 0;
  uint64_t size = 0;
  CHECK(gf_run_fetch(&size, run, total, &value, sizeof value));
  const int64_t expected = (int64_t)(K - 1) * K * (2 * K - 1) / 6;
  printf("sum of squares of 0..%d = %" PRId64 " (expected %" PRId64 ")\n", K - 1, value, expected);

  gf_run_stats stats = GF_RUN_STATS_INIT;
  CHECK(gf_run_stats_get(&stats, run));
  printf("transfers: %" PRIu64 " (%" PRIu64 " bytes)\n", stats.transfers, stats.bytes_transferred);

  if (wrong || value != expected || size != sizeof value) {
    fprintf(stderr, "mixed_resources: FAILED (%d task(s) on the wrong kind of worker, value %s)\n",
            wrong, value == expected ? "right" : "wrong");
    goto done;
  }
  exit_code = 0;

done:
  gf_run_destroy(run);
  gf_graph_destroy(graph);
  gf_pool_destroy(pool);
  return exit_code;
}
