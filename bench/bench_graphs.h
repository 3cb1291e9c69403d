/* The graphs of gpuflow_bench (wide, chain, tree) and their task bodies, which check what ran:
 * the same graphs as ../shared/bench/starpu_bench.c. Included by gpuflow_bench.c only, after
 * bench_util.h. */
#ifndef GPUFLOW_BENCH_GRAPHS_H
#define GPUFLOW_BENCH_GRAPHS_H

#include <gpuflow.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---- Task bodies ------------------------------------------------------------------------- */

/* --work-us: every body first keeps its core busy this long (scaling with tasks that are not
 * empty: no scheduler scales no-op tasks past the cost of handing them out). */
static long work_ns;

static void work(void) {
  if (work_ns <= 0) return;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < work_ns);
}

static int noop(gf_task_ctx *ctx, void *user_data) {
  (void)ctx;
  (void)user_data;
  work();
  return 0;
}

/* chain: task i (user_data = i) must run after task i-1 finished. */
static atomic_long chain_next;
static atomic_int chain_out_of_order;
static int chain_step(gf_task_ctx *ctx, void *user_data) {
  (void)ctx;
  const long i = (long)(intptr_t)user_data;
  work();
  if (atomic_load_explicit(&chain_next, memory_order_relaxed) != i)
    atomic_store_explicit(&chain_out_of_order, 1, memory_order_relaxed);
  atomic_store_explicit(&chain_next, i + 1, memory_order_relaxed);
  return 0;
}

static int one(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  work();
  void *out;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(int64_t)) != GF_OK) return 1;
  *(int64_t *)out = 1;
  return 0;
}

static int add(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  work();
  const void *a, *b;
  uint64_t size_a, size_b;
  void *out;
  if (gf_task_ctx_input(&a, &size_a, ctx, 0) != GF_OK ||
      gf_task_ctx_input(&b, &size_b, ctx, 1) != GF_OK ||
      gf_task_ctx_output(&out, ctx, 0, sizeof(int64_t)) != GF_OK)
    return 1;
  *(int64_t *)out = *(const int64_t *)a + *(const int64_t *)b;
  return 0;
}

/* ---- Graphs ------------------------------------------------------------------------------ */

/* Which workers may run the tasks: 0 CPU only, 1 GPU only (--gpu), 2 either (--mixed). */
static int body_mode;

/* --resources: what every task requests (none by default), so that placement and the workers'
 * ledgers are in the path of every task as they are for users' annotated tasks. */
static const gf_resource *task_resources;
static uint32_t task_resource_count;

static void set_body(gf_task_desc *desc, gf_task_fn fn) {
  desc->cpu_fn = body_mode == 1 ? NULL : fn;
  desc->gpu_fn = body_mode == 0 ? NULL : fn;
  desc->resources = task_resources;
  desc->resource_count = task_resource_count;
}

static gf_graph *build_wide(long n) {
  gf_graph *graph;
  CHECK(gf_graph_create(&graph));
  gf_task_desc desc = GF_TASK_DESC_INIT;
  set_body(&desc, noop);
  for (long i = 0; i < n; i++) {
    gf_task task;
    CHECK(gf_graph_add_task(&task, graph, &desc));
  }
  return graph;
}

static gf_graph *build_chain(long n) {
  gf_graph *graph;
  CHECK(gf_graph_create(&graph));
  gf_task_desc desc = GF_TASK_DESC_INIT;
  set_body(&desc, chain_step);
  gf_task prev = {0};
  for (long i = 0; i < n; i++) {
    desc.user_data = (void *)(intptr_t)i;
    desc.after = i ? &prev : NULL;
    desc.after_count = i ? 1 : 0;
    CHECK(gf_graph_add_task(&prev, graph, &desc));
  }
  return graph;
}

/* Returns the graph; *root is the buffer holding the total. */
static gf_graph *build_tree(long n, gf_data *root) {
  gf_graph *graph;
  CHECK(gf_graph_create(&graph));
  gf_data *level = malloc((size_t)n * sizeof *level);
  if (!level) {
    fprintf(stderr, "gpuflow_bench: out of memory\n");
    exit(1);
  }
  gf_buffer_desc buf = GF_BUFFER_DESC_INIT;
  buf.size = sizeof(int64_t);
  gf_task_desc leaf = GF_TASK_DESC_INIT;
  set_body(&leaf, one);
  leaf.output_count = 1;
  for (long i = 0; i < n; i++) {
    gf_task task;
    CHECK(gf_graph_add_buffer(&level[i], graph, &buf));
    leaf.outputs = &level[i];
    CHECK(gf_graph_add_task(&task, graph, &leaf));
  }
  gf_task_desc sum = GF_TASK_DESC_INIT;
  set_body(&sum, add);
  sum.input_count = 2;
  sum.output_count = 1;
  /* Level by level, in place: level[i / 2] = level[i] + level[i + 1]; an odd one moves up. */
  for (long width = n; width > 1; width = (width + 1) / 2) {
    for (long i = 0; i + 1 < width; i += 2) {
      gf_data out;
      gf_task task;
      CHECK(gf_graph_add_buffer(&out, graph, &buf));
      sum.inputs = &level[i];
      sum.outputs = &out;
      CHECK(gf_graph_add_task(&task, graph, &sum));
      level[i / 2] = out;
    }
    if (width % 2) level[width / 2] = level[width - 1];
  }
  *root = level[0];
  free(level);
  return graph;
}

#endif
