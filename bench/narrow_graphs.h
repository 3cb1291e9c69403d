/* The shapes of the narrow benchmark's graphs (stencil, neighbour, tree), independent of any
 * runtime: every peer (narrow_bench.c for gpuflow, narrow_omp.c for OpenMP) builds its own graph
 * from the same predecessor lists, and every task computes its value with narrow_value, so that
 * the values at the sinks can be checked exactly against narrow_reference. */
#ifndef GPUFLOW_NARROW_GRAPHS_H
#define GPUFLOW_NARROW_GRAPHS_H

#include <stdint.h>

enum narrow_kind {
  NARROW_STENCIL,   /* W wide, S steps; (k, j) reads all W tasks of step k-1 */
  NARROW_NEIGHBOUR, /* W wide, S steps; (k, j) reads (k-1, j-1), (k-1, j), (k-1, j+1), clamped */
  NARROW_TREE       /* L leaves (a power of two) summed pairwise up to one root */
};

/* Tasks are numbered 0..tasks-1 in an order where every predecessor comes first (stencil and
 * neighbour: k * width + j; tree: the leaves, then each level of sums), which is also the order
 * in which the peers add them. */
struct narrow_shape {
  enum narrow_kind kind;
  long width;  /* stencil, neighbour */
  long steps;  /* stencil, neighbour */
  long leaves; /* tree */
  long tasks;
  long depth;       /* tasks on the longest path */
  long *pred_begin; /* tasks + 1 offsets into preds */
  long *preds;      /* the predecessors of task t: preds[pred_begin[t] .. pred_begin[t + 1]) */
  long *sinks;      /* the tasks nothing reads: the values checked */
  long sink_count;
  uint64_t *expected; /* expected[i]: the value of sinks[i] */
};

/* Builds the shape and its expected values; exits 1 when out of memory. */
void narrow_shape_init(struct narrow_shape *shape, enum narrow_kind kind, long width, long steps,
                       long leaves);
void narrow_shape_free(struct narrow_shape *shape);

static inline long narrow_pred_count(const struct narrow_shape *shape, long task) {
  return shape->pred_begin[task + 1] - shape->pred_begin[task];
}

/* A task's value from its number and its inputs' values, in predecessor order: a multiplicative
 * hash, so that a stale or missing input changes the sinks (a sum or a max of 1,000 steps would
 * overflow or hide one). Start with narrow_value_seed, fold in each input, in order. */
static inline uint64_t narrow_value_seed(long task) {
  return (uint64_t)task * UINT64_C(0xD1B54A32D192ED03) + 1;
}
static inline uint64_t narrow_value_fold(uint64_t acc, uint64_t input) {
  acc = (acc ^ input) * UINT64_C(0x9E3779B97F4A7C15);
  return acc ^ (acc >> 29);
}

#endif
