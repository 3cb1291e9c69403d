/* Narrow dependent graphs with real work on gpuflow: how much of the machine the scheduler keeps
 * busy when only a few tasks are ready at a time and each does U microseconds of work. The
 * command line and the JSON line are narrow_harness.c's; narrow_omp.c runs the same graphs with
 * OpenMP tasks, and bench/narrow_compare.py runs both, interleaved, over a sweep of U.
 *
 * Every dependency is a data dependency the scheduler sees: each task produces one 8-byte
 * buffer, and reads its predecessors' buffers as inputs. Timed region: gf_graph_submit +
 * gf_run_wait of a graph built beforehand (once per U, and submitted for every run). The pool
 * has --workers CPU workers and no GPU workers (host backend, no emulated devices). Public C ABI
 * only. */
#include <gpuflow.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "narrow_harness.h"

static gf_pool *pool;
static const struct narrow_shape *current_shape; /* the shape of the graph being run */

static void check(gf_status status, const char *what) {
  if (status != GF_OK) {
    fprintf(stderr, "narrow_bench: %s failed: %s: %s\n", what, gf_status_name(status),
            gf_last_error());
    exit(1);
  }
}
#define CHECK(call) check((call), #call)

/* Reads the inputs in predecessor order, works, writes the value; user_data is the task. */
static int body(gf_task_ctx *ctx, void *user_data) {
  const long task = (long)(intptr_t)user_data;
  const long inputs = narrow_pred_count(current_shape, task);
  uint64_t acc = narrow_value_seed(task);
  for (long i = 0; i < inputs; i++) {
    const void *in;
    uint64_t size;
    if (gf_task_ctx_input(&in, &size, ctx, (uint32_t)i) != GF_OK || size != sizeof(uint64_t)) {
      gf_task_ctx_fail(ctx, "an input is not an 8-byte buffer");
      return 1;
    }
    acc = narrow_value_fold(acc, *(const uint64_t *)in);
  }
  narrow_work(task);
  void *out;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(uint64_t)) != GF_OK) return 1;
  *(uint64_t *)out = acc;
  return 0;
}

static void start(int workers) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_HOST;
  config.cpu_workers = workers;
  config.emulated_devices = -1; /* CPU workers only */
  CHECK(gf_pool_create(&pool, &config));
  uint32_t count = 0;
  CHECK(gf_pool_worker_count(&count, pool));
  if (count != (uint32_t)workers) {
    fprintf(stderr, "narrow_bench: the pool has %u workers, want %d\n", count, workers);
    exit(1);
  }
}

static void stop(void) {
  gf_pool_destroy(pool);
}

struct built {
  gf_graph *graph;
  gf_task *tasks;
  gf_data *outputs; /* outputs[t]: task t's buffer */
};

static void *prepare(const struct narrow_shape *shape) {
  struct built *b = malloc(sizeof *b);
  long max_inputs = 0;
  for (long t = 0; t < shape->tasks; t++)
    if (narrow_pred_count(shape, t) > max_inputs) max_inputs = narrow_pred_count(shape, t);
  gf_data *inputs = malloc((size_t)(max_inputs ? max_inputs : 1) * sizeof(gf_data));
  if (b) {
    b->tasks = malloc((size_t)shape->tasks * sizeof(gf_task));
    b->outputs = malloc((size_t)shape->tasks * sizeof(gf_data));
  }
  if (!b || !inputs || !b->tasks || !b->outputs) {
    fprintf(stderr, "narrow_bench: out of memory\n");
    exit(1);
  }
  CHECK(gf_graph_create(&b->graph));
  gf_buffer_desc buffer = GF_BUFFER_DESC_INIT;
  buffer.size = sizeof(uint64_t);
  gf_task_desc desc = GF_TASK_DESC_INIT;
  desc.cpu_fn = body;
  desc.cost_key = "narrow"; /* every task does the same work */
  desc.output_count = 1;
  for (long t = 0; t < shape->tasks; t++) {
    CHECK(gf_graph_add_buffer(&b->outputs[t], b->graph, &buffer));
    const long n = narrow_pred_count(shape, t);
    for (long i = 0; i < n; i++) inputs[i] = b->outputs[shape->preds[shape->pred_begin[t] + i]];
    desc.user_data = (void *)(intptr_t)t;
    desc.inputs = inputs;
    desc.input_count = (uint32_t)n;
    desc.outputs = &b->outputs[t];
    CHECK(gf_graph_add_task(&b->tasks[t], b->graph, &desc));
  }
  free(inputs);
  return b;
}

static void run(void *prepared, const struct narrow_shape *shape, int64_t *begin_ns,
                int64_t *end_ns, uint64_t *sink_values) {
  struct built *b = prepared;
  current_shape = shape;
  gf_run *r;
  *begin_ns = narrow_now_ns();
  CHECK(gf_graph_submit(&r, pool, b->graph, NULL));
  CHECK(gf_run_wait(r, -1));
  *end_ns = narrow_now_ns();
  for (long s = 0; s < shape->sink_count; s++) {
    uint64_t size = 0;
    CHECK(gf_run_fetch(&size, r, b->outputs[shape->sinks[s]], &sink_values[s], sizeof(uint64_t)));
  }
  for (long t = 0; t < shape->tasks; t++) {
    uint32_t worker;
    CHECK(gf_run_task_worker(&worker, r, b->tasks[t]));
    narrow_records[t].worker = (int32_t)worker;
  }
  gf_run_destroy(r);
}

static void release(void *prepared) {
  struct built *b = prepared;
  gf_graph_destroy(b->graph);
  free(b->tasks);
  free(b->outputs);
  free(b);
}

int main(int argc, char **argv) {
  const struct narrow_peer gpuflow = {"gpuflow", start, prepare, run, release, stop};
  return narrow_main(argc, argv, &gpuflow);
}
