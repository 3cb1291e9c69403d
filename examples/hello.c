/* hello — the smallest gpuflow program: submit one function and read its result.
 *
 * The gpuflow equivalent of Dask's
 *     future = client.submit(lambda: 10 + 1); print(future.result())
 * One task writes 10 + 1 into an 8-byte buffer; the caller fetches it and prints "11".
 * Exits non-zero (printing gf_last_error()) if any call fails or the value is wrong. */
#include <gpuflow.h>

#include <inttypes.h>
#include <stdio.h>

/* Reports a failed gpuflow call and jumps to cleanup. */
#define CHECK(call)                                                                       \
  do {                                                                                    \
    gf_status check_status_ = (call);                                                     \
    if (check_status_ != GF_OK) {                                                         \
      fprintf(stderr, "hello: %s failed: %s: %s\n", #call, gf_status_name(check_status_), \
              gf_last_error());                                                           \
      goto done;                                                                          \
    }                                                                                     \
  } while (0)

/* The task body: runs on a CPU worker and writes its output buffer 0. */
static int add_ten_and_one(gf_task_ctx *ctx, void *user_data) {
  (void)user_data;
  void *out = NULL;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof(int64_t)) != GF_OK) return 1;
  *(int64_t *)out = 10 + 1;
  return 0;
}

int main(void) {
  int exit_code = 1;
  gf_pool *pool = NULL;
  gf_graph *graph = NULL;
  gf_run *run = NULL;

  CHECK(gf_pool_create(&pool, NULL)); /* default pool: every core, plus emulated devices */
  CHECK(gf_graph_create(&graph));

  /* The result: an 8-byte buffer. No task consumes it, so it is kept for gf_run_fetch. */
  gf_buffer_desc result_desc = GF_BUFFER_DESC_INIT;
  result_desc.name = "result";
  result_desc.size = sizeof(int64_t);
  gf_data result;
  CHECK(gf_graph_add_buffer(&result, graph, &result_desc));

  gf_task_desc task_desc = GF_TASK_DESC_INIT;
  task_desc.name = "ten_plus_one";
  task_desc.cpu_fn = add_ten_and_one;
  task_desc.outputs = &result;
  task_desc.output_count = 1;
  gf_task task;
  CHECK(gf_graph_add_task(&task, graph, &task_desc));

  CHECK(gf_graph_submit(&run, pool, graph, NULL));
  CHECK(gf_run_wait(run, -1));

  int64_t value = 0;
  uint64_t size = 0;
  CHECK(gf_run_fetch(&size, run, result, &value, sizeof value));
  printf("%" PRId64 "\n", value);
  if (size != sizeof value || value != 11) {
    fprintf(stderr, "hello: expected 11 (8 bytes), got %" PRId64 " (%" PRIu64 " bytes)\n", value,
            size);
    goto done;
  }
  exit_code = 0;

done:
  gf_run_destroy(run);
  gf_graph_destroy(graph);
  gf_pool_destroy(pool);
  return exit_code;
}
