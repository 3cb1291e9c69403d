/* The narrow benchmark's graph shapes and the values their sinks must hold. */
#include "narrow_graphs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *checked_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "narrow: out of memory\n");
    exit(1);
  }
  return p;
}

/* Layered shapes: task (k, j) is k * width + j; step 0 reads nothing. */
static void add_layered_preds(struct narrow_shape *shape, long *count) {
  const long w = shape->width;
  for (long k = 0; k < shape->steps; k++) {
    for (long j = 0; j < w; j++) {
      const long t = k * w + j;
      shape->pred_begin[t] = *count;
      if (k == 0) continue;
      if (shape->kind == NARROW_STENCIL) {
        for (long i = 0; i < w; i++) shape->preds[(*count)++] = (k - 1) * w + i;
      } else {
        /* Clamped at the edges: the edge tasks read two predecessors, never one twice. */
        const long lo = j > 0 ? j - 1 : 0, hi = j + 1 < w ? j + 1 : w - 1;
        for (long i = lo; i <= hi; i++) shape->preds[(*count)++] = (k - 1) * w + i;
      }
    }
  }
}

/* Tree: leaves 0..L-1, then each level of sums; sum i of a level reads nodes 2i and 2i+1 of the
 * level below. */
static void add_tree_preds(struct narrow_shape *shape, long *count) {
  long below = 0, t = 0;
  for (; t < shape->leaves; t++) shape->pred_begin[t] = *count;
  for (long level_width = shape->leaves / 2; level_width >= 1; level_width /= 2) {
    for (long i = 0; i < level_width; i++, t++) {
      shape->pred_begin[t] = *count;
      shape->preds[(*count)++] = below + 2 * i;
      shape->preds[(*count)++] = below + 2 * i + 1;
    }
    below += 2 * level_width;
  }
}

void narrow_shape_init(struct narrow_shape *shape, enum narrow_kind kind, long width, long steps,
                       long leaves) {
  shape->kind = kind;
  shape->width = width;
  shape->steps = steps;
  shape->leaves = leaves;
  long edges;
  if (kind == NARROW_TREE) {
    shape->tasks = 2 * leaves - 1;
    edges = 2 * (leaves - 1);
    shape->depth = 1;
    for (long l = leaves; l > 1; l /= 2) shape->depth++;
  } else {
    shape->tasks = width * steps;
    edges = (steps - 1) * width * (kind == NARROW_STENCIL ? width : 3); /* at most */
    shape->depth = steps;
  }
  shape->pred_begin = checked_malloc((size_t)(shape->tasks + 1) * sizeof(long));
  shape->preds = checked_malloc((size_t)edges * sizeof(long));
  long count = 0;
  if (kind == NARROW_TREE)
    add_tree_preds(shape, &count);
  else
    add_layered_preds(shape, &count);
  shape->pred_begin[shape->tasks] = count;

  /* The sinks: tasks no other task reads. */
  unsigned char *read = checked_malloc((size_t)shape->tasks);
  memset(read, 0, (size_t)shape->tasks);
  for (long e = 0; e < count; e++) read[shape->preds[e]] = 1;
  shape->sink_count = 0;
  for (long t = 0; t < shape->tasks; t++) shape->sink_count += !read[t];
  shape->sinks = checked_malloc((size_t)shape->sink_count * sizeof(long));
  shape->expected = checked_malloc((size_t)shape->sink_count * sizeof(uint64_t));

  /* Every value in task order (predecessors come first), as the peers compute them. */
  uint64_t *value = checked_malloc((size_t)shape->tasks * sizeof(uint64_t));
  long s = 0;
  for (long t = 0; t < shape->tasks; t++) {
    uint64_t acc = narrow_value_seed(t);
    for (long e = shape->pred_begin[t]; e < shape->pred_begin[t + 1]; e++)
      acc = narrow_value_fold(acc, value[shape->preds[e]]);
    value[t] = acc;
    if (!read[t]) {
      shape->sinks[s] = t;
      shape->expected[s++] = acc;
    }
  }
  free(value);
  free(read);
}

void narrow_shape_free(struct narrow_shape *shape) {
  free(shape->pred_begin);
  free(shape->preds);
  free(shape->sinks);
  free(shape->expected);
}
