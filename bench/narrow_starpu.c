/* The narrow benchmark's graphs as StarPU tasks (Debian's libstarpu-dev 1.3): a third peer beside
 * narrow_omp.c, built only where pkg-config finds starpu-1.3. Same command line, body, checks and
 * JSON line as narrow_bench.c (narrow_harness.c), with "peer": "starpu".
 *
 * Each task's value lives in a registered variable handle; a task reads its predecessors'
 * handles (STARPU_R) and writes its own (STARPU_W), and StarPU derives the dependences from the
 * order of submission, as ../shared/bench/starpu_bench.c does. Timed region: submitting every
 * task + starpu_task_wait_for_all (registration is done once per U, untimed). Workers: --workers
 * CPU workers, no CUDA or OpenCL; the scheduler is StarPU's default unless STARPU_SCHED names
 * one (no performance model: the tasks all do the same work). */
#define _POSIX_C_SOURCE 200809L
#include <starpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "narrow_harness.h"

static const struct narrow_shape *current_shape; /* the shape of the graph being run */

static void body(void *buffers[], void *arg) {
  const long task = (long)(intptr_t)arg;
  const long inputs = narrow_pred_count(current_shape, task);
  uint64_t acc = narrow_value_seed(task);
  for (long i = 0; i < inputs; i++)
    acc = narrow_value_fold(acc, *(const uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[i]));
  narrow_work(task);
  narrow_records[task].worker = starpu_worker_get_id();
  *(uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[inputs]) = acc;
}

static struct starpu_codelet codelet = {
    .cpu_funcs = {body}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = "narrow"};

static void start(int workers) {
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = workers;
  conf.ncuda = 0;
  conf.nopencl = 0;
  if (starpu_init(&conf) != 0) {
    fprintf(stderr, "narrow_starpu: starpu_init failed\n");
    exit(1);
  }
  if ((int)starpu_cpu_worker_get_count() != workers) {
    fprintf(stderr, "narrow_starpu: StarPU has %u CPU workers, want %d\n",
            starpu_cpu_worker_get_count(), workers);
    exit(1);
  }
}

static void stop(void) {
  starpu_shutdown();
}

struct built {
  long tasks;
  uint64_t *values;
  starpu_data_handle_t *handles;
  struct starpu_data_descr *descrs; /* room for one task's inputs and output */
};

static void *prepare(const struct narrow_shape *shape) {
  struct built *b = malloc(sizeof *b);
  long max_inputs = 0;
  for (long t = 0; t < shape->tasks; t++)
    if (narrow_pred_count(shape, t) > max_inputs) max_inputs = narrow_pred_count(shape, t);
  if (b) {
    b->values = calloc((size_t)shape->tasks, sizeof(uint64_t));
    b->handles = malloc((size_t)shape->tasks * sizeof(starpu_data_handle_t));
    b->descrs = malloc((size_t)(max_inputs + 1) * sizeof(struct starpu_data_descr));
  }
  if (!b || !b->values || !b->handles || !b->descrs) {
    fprintf(stderr, "narrow_starpu: out of memory\n");
    exit(1);
  }
  b->tasks = shape->tasks;
  for (long t = 0; t < shape->tasks; t++)
    starpu_variable_data_register(&b->handles[t], STARPU_MAIN_RAM, (uintptr_t)&b->values[t],
                                  sizeof(uint64_t));
  return b;
}

/* The values are not zeroed between runs (their handles own them); a task run before its inputs
 * were done is caught by the harness's check of the records instead. */
static void run(void *prepared, const struct narrow_shape *shape, int64_t *begin_ns,
                int64_t *end_ns, uint64_t *sink_values) {
  struct built *b = prepared;
  current_shape = shape;
  *begin_ns = narrow_now_ns();
  for (long t = 0; t < shape->tasks; t++) {
    const long inputs = narrow_pred_count(shape, t);
    for (long i = 0; i < inputs; i++) {
      b->descrs[i].handle = b->handles[shape->preds[shape->pred_begin[t] + i]];
      b->descrs[i].mode = STARPU_R;
    }
    b->descrs[inputs].handle = b->handles[t];
    b->descrs[inputs].mode = STARPU_W;
    /* The task number travels as the argument pointer itself, neither copied nor freed. */
    if (starpu_task_insert(&codelet, STARPU_DATA_MODE_ARRAY, b->descrs, (int)(inputs + 1),
                           STARPU_CL_ARGS_NFREE, (void *)(intptr_t)t, (size_t)0, 0) != 0) {
      fprintf(stderr, "narrow_starpu: starpu_task_insert failed at task %ld\n", t);
      exit(1);
    }
  }
  starpu_task_wait_for_all();
  *end_ns = narrow_now_ns();
  for (long s = 0; s < shape->sink_count; s++) {
    starpu_data_handle_t h = b->handles[shape->sinks[s]];
    starpu_data_acquire(h, STARPU_R);
    sink_values[s] = b->values[shape->sinks[s]];
    starpu_data_release(h);
  }
}

static void release(void *prepared) {
  struct built *b = prepared;
  for (long t = 0; t < b->tasks; t++) starpu_data_unregister(b->handles[t]);
  free(b->values);
  free(b->handles);
  free(b->descrs);
  free(b);
}

int main(int argc, char **argv) {
  const struct narrow_peer starpu = {"starpu", start, prepare, run, release, stop};
  return narrow_main(argc, argv, &starpu);
}
