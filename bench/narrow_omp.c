/* The narrow benchmark's graphs as OpenMP tasks (GCC's libgomp): the peer gpuflow's scheduler
 * is held to on narrow dependent graphs. Same command line, body, checks and JSON line as
 * narrow_bench.c (narrow_harness.c), with "peer": "openmp".
 *
 * One thread of `#pragma omp parallel` + `single` creates every task in task order, each with
 * depend(out:) on its own value slot and depend(in:) on each predecessor's slot. libgomp matches
 * dependences by address, so every slot has its own address (a cache line each, as gpuflow's
 * buffers are separate allocations), and a task gets one depend item per predecessor through
 * OpenMP 5.0's iterator modifier (GCC 12 has it). Timed region: the parallel region, task
 * creation included (OpenMP has no graph to build apart). Threads: --workers, with dynamic
 * adjustment off; libgomp's other settings (OMP_WAIT_POLICY, GOMP_SPINCOUNT) are its defaults
 * unless the environment sets them. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "narrow_harness.h"

struct slot {
  _Alignas(64) uint64_t value;
};

static int threads;

static void start(int workers) {
  omp_set_dynamic(0);
  omp_set_num_threads(workers);
  threads = workers;
}

static void stop(void) {}

static void *prepare(const struct narrow_shape *shape) {
  struct slot *slots = aligned_alloc(64, (size_t)shape->tasks * sizeof(struct slot));
  if (!slots) {
    fprintf(stderr, "narrow_omp: out of memory\n");
    exit(1);
  }
  return slots;
}

static void run_task(struct slot *slots, const long *preds, long inputs, long task) {
  uint64_t acc = narrow_value_seed(task);
  for (long i = 0; i < inputs; i++) acc = narrow_value_fold(acc, slots[preds[i]].value);
  narrow_work(task);
  narrow_records[task].worker = omp_get_thread_num();
  slots[task].value = acc;
}

static void run(void *prepared, const struct narrow_shape *shape, int64_t *begin_ns,
                int64_t *end_ns, uint64_t *sink_values) {
  struct slot *slots = prepared;
  /* Zeroed each run: a task that read its input too early would read 0, not the last run's. */
  memset(slots, 0, (size_t)shape->tasks * sizeof(struct slot));
  int team = 0;
  *begin_ns = narrow_now_ns();
#pragma omp parallel
#pragma omp single
  {
    team = omp_get_num_threads();
    for (long t = 0; t < shape->tasks; t++) {
      const long *preds = &shape->preds[shape->pred_begin[t]];
      const long inputs = narrow_pred_count(shape, t);
      /* One depend item per predecessor. (clang-format would break the clauses at colons.) */
      // clang-format off
#pragma omp task firstprivate(t, preds, inputs) \
    depend(iterator(i = 0:inputs), in: slots[preds[i]]) depend(out: slots[t])
      // clang-format on
      run_task(slots, preds, inputs, t);
    }
  }
  *end_ns = narrow_now_ns();
  if (team != threads) {
    fprintf(stderr, "narrow_omp: the team has %d threads, want %d\n", team, threads);
    exit(1);
  }
  for (long s = 0; s < shape->sink_count; s++) sink_values[s] = slots[shape->sinks[s]].value;
}

static void release(void *prepared) {
  free(prepared);
}

int main(int argc, char **argv) {
  const struct narrow_peer openmp = {"openmp", start, prepare, run, release, stop};
  return narrow_main(argc, argv, &openmp);
}
