/* The install test's consumer: one task writes 42, the caller fetches it. Built against an
 * installed gpuflow through find_package(gpuflow) and through pkg-config. */
#include <gpuflow.h>

#include <stdint.h>
#include <stdio.h>

static int answer(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  void *out = NULL;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(int64_t)) != GF_OK) return 1;
  *(int64_t *)out = 42;
  return 0;
}

int main(void) {
  gf_pool *pool = NULL;
  gf_graph *graph = NULL;
  gf_run *run = NULL;
  int64_t value = 0;
  uint64_t size = 0;
  int ok = 0;
  gf_buffer_desc buffer = GF_BUFFER_DESC_INIT;
  gf_task_desc task = GF_TASK_DESC_INIT;
  gf_data result;
  gf_task id;
  buffer.name = "result";
  buffer.size = sizeof(int64_t);
  task.name = "answer";
  task.cpu_fn = answer;
  task.outputs = &result;
  task.output_count = 1;
  if (gf_pool_create(&pool, NULL) == GF_OK && gf_graph_create(&graph) == GF_OK &&
      gf_graph_add_buffer(&result, graph, &buffer) == GF_OK &&
      gf_graph_add_task(&id, graph, &task) == GF_OK &&
      gf_graph_submit(&run, pool, graph, NULL) == GF_OK && gf_run_wait(run, -1) == GF_OK &&
      gf_run_fetch(&size, run, result, &value, sizeof value) == GF_OK)
    ok = size == sizeof value && value == 42;
  if (!ok)
    fprintf(stderr, "consumer: failed (value %lld): %s\n", (long long)value, gf_last_error());
  else
    printf("consumer: gpuflow %s, result %lld\n", gf_version_string(), (long long)value);
  gf_run_destroy(run);
  gf_graph_destroy(graph);
  gf_pool_destroy(pool);
  return ok ? 0 : 1;
}
