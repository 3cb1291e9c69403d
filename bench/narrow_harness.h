/* What every peer of the narrow benchmark shares: the command line, the sweep over work sizes,
 * the checks of each run (every task ran once, after its inputs; the sinks hold the expected
 * values) and the JSON line per work size. A peer (narrow_bench.c: gpuflow, narrow_omp.c:
 * OpenMP) only says how to start its workers, build a graph of a shape and run it once. */
#ifndef GPUFLOW_NARROW_HARNESS_H
#define GPUFLOW_NARROW_HARNESS_H

#include <stdint.h>

#include "narrow_graphs.h"
#include "narrow_work.h"

struct narrow_peer {
  const char *name; /* the JSON line's "peer" */
  /* Starts `workers` workers (threads) that every later run uses. */
  void (*start)(int workers);
  /* Builds what runs of `shape` need (a graph, value slots); done once per work size, untimed. */
  void *(*prepare)(const struct narrow_shape *shape);
  /* Runs the graph once. Each task's body calls narrow_work(task) and passes on its inputs'
   * values through narrow_value_seed/fold. Sets *begin_ns and *end_ns (narrow_now_ns) around
   * the timed region: from handing the graph over to its last task being done, graph
   * construction excluded where the peer can separate it. Fills sink_values (in the order of
   * shape->sinks) and narrow_records[t].worker for every task t, both outside the timed region
   * where it can. Exits 1 on any failure, with a message. */
  void (*run)(void *prepared, const struct narrow_shape *shape, int64_t *begin_ns, int64_t *end_ns,
              uint64_t *sink_values);
  void (*release)(void *prepared);
  /* Stops the workers. */
  void (*stop)(void);
};

/* The whole program: parses argv, runs the sweep, prints a line per work size. Returns the exit
 * status (0; 2 for a bad command line); exits 1 when a run fails or computes a wrong value. */
int narrow_main(int argc, char **argv, const struct narrow_peer *peer);

#endif
