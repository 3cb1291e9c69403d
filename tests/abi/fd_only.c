/* fd_only.c: a graph driven to completion the way a host event loop that cannot be entered from
 * foreign threads does it (Julia, libuv, asyncio): no completion callback, no event callback,
 * no blocking gf_run_wait — only poll(2) on gf_run_fd, then gf_run_poll and gf_run_fetch.
 *
 * A chain of tasks, each adding one to its input, the first gated on a flag the main thread sets
 * only after it has seen the descriptor not readable: so the descriptor must go from not ready to
 * ready while the loop watches it. Exit status 0 on success; each failed check is printed. */
#define _POSIX_C_SOURCE 200809L
#include <gpuflow.h>

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define CHAIN 16

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
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

static atomic_int gate = 0;

/* Output 0 = input 0 + 1, or 1 without an input (the first task, which waits for the gate). */
static int add_one(gf_task_ctx *ctx, void *user_data) {
  int64_t value = 0;
  if (user_data) {
    while (!atomic_load(&gate)) poll(NULL, 0, 1); /* a millisecond */
  } else {
    const void *in = NULL;
    uint64_t size = 0;
    if (gf_task_ctx_input(&in, &size, ctx, 0) != GF_OK || size != sizeof value) return 1;
    memcpy(&value, in, sizeof value);
  }
  void *out = NULL;
  if (gf_task_ctx_output(&out, ctx, 0, sizeof value) != GF_OK) return 1;
  value += 1;
  memcpy(out, &value, sizeof value);
  return 0;
}

static int readable(int fd, int timeout_ms) {
  struct pollfd p = {fd, POLLIN, 0};
  int n = poll(&p, 1, timeout_ms);
  return n == 1 && (p.revents & POLLIN);
}

int main(void) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_HOST;
  config.cpu_workers = 2;
  gf_pool *pool = NULL;
  CHECK_OK(gf_pool_create(&pool, &config));
  gf_graph *graph = NULL;
  CHECK_OK(gf_graph_create(&graph));
  gf_data data[CHAIN];
  for (int i = 0; i < CHAIN; ++i) {
    gf_buffer_desc b = GF_BUFFER_DESC_INIT;
    b.size = sizeof(int64_t);
    CHECK_OK(gf_graph_add_buffer(&data[i], graph, &b));
    gf_task_desc d = GF_TASK_DESC_INIT;
    d.cpu_fn = add_one;
    d.user_data = i == 0 ? (void *)&gate : NULL;
    d.inputs = i == 0 ? NULL : &data[i - 1];
    d.input_count = i == 0 ? 0 : 1;
    d.outputs = &data[i];
    d.output_count = 1;
    gf_task t;
    CHECK_OK(gf_graph_add_task(&t, graph, &d));
  }
  gf_run *run = NULL;
  CHECK_OK(gf_graph_submit(&run, pool, graph, NULL)); /* no options: no on_complete */
  int fd = -1;
  CHECK_OK(gf_run_fd(&fd, run));
  CHECK(fd >= 0);

  /* The gate is closed: the run cannot finish, the descriptor is not readable. */
  CHECK(!readable(fd, 20));
  CHECK(gf_run_poll(run) == GF_TIMEOUT);
  atomic_store(&gate, 1);

  /* The event loop: wait on the descriptor alone, in slices, as a host loop would. */
  int slices = 0;
  while (!readable(fd, 100) && ++slices < 600) {
  }
  CHECK(slices < 600);
  CHECK(gf_run_poll(run) == GF_OK);
  CHECK(readable(fd, 0)); /* it stays readable */
  gf_run_state state = GF_RUN_RUNNING;
  CHECK(gf_run_state_get(&state, run) == GF_OK && state == GF_RUN_SUCCEEDED);
  int64_t last = 0;
  uint64_t size = 0;
  CHECK(gf_run_fetch(&size, run, data[CHAIN - 1], &last, sizeof last) == GF_OK);
  CHECK(last == CHAIN);

  gf_run_destroy(run);
  gf_graph_destroy(graph);
  gf_pool_destroy(pool);
  if (failures) {
    fprintf(stderr, "fd_only: %d check(s) failed\n", failures);
    return 1;
  }
  printf("fd_only: %d tasks finished, seen through gf_run_fd alone\n", CHAIN);
  return 0;
}
