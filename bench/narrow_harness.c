/* The narrow benchmark's command line, timed runs, checks and report, shared by every peer.
 *
 * Usage: BIN stencil|neighbour|tree --work-us U[,U2,...] [--width W] [--steps S] [--leaves L]
 *            [--repeats R] [--workers N]
 *   stencil   : W wide (default N), S steps (default 1000); task (k, j) reads all W tasks of
 *               step k-1
 *   neighbour : W wide (default 2N), S steps (default 1000); task (k, j) reads (k-1, j-1),
 *               (k-1, j), (k-1, j+1), clamped at the edges
 *   tree      : L leaves (a power of two, default 1024) summed pairwise: 2L-1 tasks
 * Every task's body keeps its core busy for U microseconds (narrow_work.c). For each U: build
 * the graph once, one untimed warm-up run, then R timed runs (default 5) on N workers (default:
 * the online CPUs). One JSON line per U; see bench/README.md for its fields. */
#define _POSIX_C_SOURCE 200809L
#include "narrow_harness.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_WORK_SIZES 64

struct options {
  enum narrow_kind kind;
  const char *graph;
  double work_us[MAX_WORK_SIZES];
  int work_count;
  long width, steps, leaves;
  int repeats, workers;
};

static void usage(const char *argv0, const char *problem) {
  if (problem) fprintf(stderr, "%s: %s\n", argv0, problem);
  fprintf(stderr,
          "usage: %s stencil|neighbour|tree --work-us U[,U2,...] [--width W] [--steps S] "
          "[--leaves L] [--repeats R] [--workers N]\n",
          argv0);
  exit(2);
}

/* A whole number in [lo, hi], or exit 2 naming the option. */
static long parse_long(const char *argv0, const char *option, const char *text, long lo, long hi) {
  char *end;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (end == text || *end || errno || v < lo || v > hi) {
    char problem[160];
    snprintf(problem, sizeof problem, "%s \"%s\": want a whole number from %ld to %ld", option,
             text, lo, hi);
    usage(argv0, problem);
  }
  return v;
}

/* "1,2.5,10": microseconds, each in [0, 1e6]. */
static int parse_work_us(const char *argv0, const char *text, double *out) {
  int n = 0;
  for (const char *p = text;;) {
    char *end;
    const double v = strtod(p, &end);
    if (end == p || !(v >= 0 && v <= 1e6) || (*end != ',' && *end) || n == MAX_WORK_SIZES) {
      char problem[200];
      snprintf(problem, sizeof problem,
               "--work-us \"%s\": want microseconds from 0 to 1e6, separated by commas, at most "
               "%d of them",
               text, MAX_WORK_SIZES);
      usage(argv0, problem);
    }
    out[n++] = v;
    if (!*end) return n;
    p = end + 1;
  }
}

static void parse(int argc, char **argv, struct options *o) {
  const char *argv0 = argv[0];
  if (argc < 2) usage(argv0, NULL);
  o->graph = argv[1];
  if (!strcmp(o->graph, "stencil"))
    o->kind = NARROW_STENCIL;
  else if (!strcmp(o->graph, "neighbour"))
    o->kind = NARROW_NEIGHBOUR;
  else if (!strcmp(o->graph, "tree"))
    o->kind = NARROW_TREE;
  else
    usage(argv0, "the graph is stencil, neighbour or tree");
  o->work_count = 0;
  o->width = o->steps = o->leaves = 0;
  o->repeats = 5;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  o->workers = cpus > 0 ? (int)cpus : 1;
  for (int i = 2; i < argc; i++) {
    const char *opt = argv[i];
    if (i + 1 >= argc) usage(argv0, "every option takes a value");
    const char *val = argv[++i];
    if (!strcmp(opt, "--work-us"))
      o->work_count = parse_work_us(argv0, val, o->work_us);
    else if (!strcmp(opt, "--width"))
      o->width = parse_long(argv0, opt, val, 1, 1 << 16);
    else if (!strcmp(opt, "--steps"))
      o->steps = parse_long(argv0, opt, val, 1, 100000000);
    else if (!strcmp(opt, "--leaves"))
      o->leaves = parse_long(argv0, opt, val, 1, 1L << 22);
    else if (!strcmp(opt, "--repeats"))
      o->repeats = (int)parse_long(argv0, opt, val, 1, 100000);
    else if (!strcmp(opt, "--workers"))
      o->workers = (int)parse_long(argv0, opt, val, 1, 4096);
    else
      usage(argv0, "unknown option");
  }
  if (!o->work_count) usage(argv0, "--work-us is required");
  if (o->kind == NARROW_TREE) {
    if (o->width || o->steps) usage(argv0, "tree takes --leaves, not --width or --steps");
    if (!o->leaves) o->leaves = 1024;
    if (o->leaves & (o->leaves - 1)) usage(argv0, "--leaves: want a power of two");
  } else {
    if (o->leaves) usage(argv0, "--leaves is for tree");
    if (!o->width) o->width = o->kind == NARROW_STENCIL ? o->workers : 2L * o->workers;
    if (!o->steps) o->steps = 1000;
    if (o->width * o->steps > 10000000) usage(argv0, "--width x --steps: at most 1e7 tasks");
  }
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v; the nearest-rank quantile q of its n values; 0 for none. */
static double quantile(double *v, long n, double q) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  long i = (long)(q * (double)n + 0.5) - 1;
  if (i < 0) i = 0;
  if (i >= n) i = n - 1;
  return v[i];
}

static double median(double *v, long n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *checked_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "narrow: out of memory\n");
    exit(1);
  }
  return p;
}

/* What the timed runs of one work size measured, beyond their times. */
struct observations {
  double *ready_to_start_us;  /* per task with inputs: its start less its last input's end */
  double *same_us, *other_us; /* the same, split by whether it ran where that input was made */
  long ready_count, same_count, other_count;
  double busy_ns;                       /* bodies' measured time, summed */
  double *first_start_us, *last_end_us; /* per run: begin to first start, last end to end */
  long *tasks_per_worker;               /* of the last run */
  int worker_slots;
};

static void observations_init(struct observations *obs, const struct narrow_shape *shape,
                              int repeats, int workers) {
  const size_t n = (size_t)shape->tasks * (size_t)repeats;
  obs->ready_to_start_us = checked_malloc(n * sizeof(double));
  obs->same_us = checked_malloc(n * sizeof(double));
  obs->other_us = checked_malloc(n * sizeof(double));
  obs->ready_count = obs->same_count = obs->other_count = 0;
  obs->busy_ns = 0;
  obs->first_start_us = checked_malloc((size_t)repeats * sizeof(double));
  obs->last_end_us = checked_malloc((size_t)repeats * sizeof(double));
  obs->worker_slots = workers;
  obs->tasks_per_worker = checked_malloc((size_t)workers * sizeof(long));
}

static void observations_free(struct observations *obs) {
  free(obs->ready_to_start_us);
  free(obs->same_us);
  free(obs->other_us);
  free(obs->first_start_us);
  free(obs->last_end_us);
  free(obs->tasks_per_worker);
}

static void reset_records(long tasks) {
  for (long t = 0; t < tasks; t++) {
    narrow_records[t].start_ns = 0;
    narrow_records[t].end_ns = 0;
    narrow_records[t].worker = -1;
  }
}

/* Checks one run: every task ran, none before its inputs were done, the sinks hold what they
 * must. Exits 1 otherwise. */
static void check_run(const struct narrow_peer *peer, const struct options *o,
                      const struct narrow_shape *shape, const uint64_t *sink_values) {
  for (long t = 0; t < shape->tasks; t++) {
    if (!narrow_records[t].start_ns) {
      fprintf(stderr, "narrow: %s %s: task %ld never ran\n", peer->name, o->graph, t);
      exit(1);
    }
    for (long e = shape->pred_begin[t]; e < shape->pred_begin[t + 1]; e++) {
      const long p = shape->preds[e];
      if (narrow_records[t].start_ns < narrow_records[p].end_ns) {
        fprintf(stderr, "narrow: %s %s: task %ld started before its input %ld was done\n",
                peer->name, o->graph, t, p);
        exit(1);
      }
    }
  }
  for (long s = 0; s < shape->sink_count; s++) {
    if (sink_values[s] != shape->expected[s]) {
      fprintf(stderr, "narrow: %s %s: task %ld holds %" PRIu64 ", want %" PRIu64 "\n", peer->name,
              o->graph, shape->sinks[s], sink_values[s], shape->expected[s]);
      exit(1);
    }
  }
}

/* Adds one checked run's records to obs. */
static void observe_run(struct observations *obs, const struct narrow_shape *shape, int run,
                        int64_t begin_ns, int64_t end_ns) {
  int64_t first_start = INT64_MAX, last_end = 0;
  for (int w = 0; w < obs->worker_slots; w++) obs->tasks_per_worker[w] = 0;
  for (long t = 0; t < shape->tasks; t++) {
    const struct narrow_record *r = &narrow_records[t];
    obs->busy_ns += (double)(r->end_ns - r->start_ns);
    if (r->start_ns < first_start) first_start = r->start_ns;
    if (r->end_ns > last_end) last_end = r->end_ns;
    if (r->worker >= 0 && r->worker < obs->worker_slots) obs->tasks_per_worker[r->worker]++;
    if (shape->pred_begin[t] == shape->pred_begin[t + 1]) continue;
    long last = -1;
    for (long e = shape->pred_begin[t]; e < shape->pred_begin[t + 1]; e++) {
      const long p = shape->preds[e];
      if (last < 0 || narrow_records[p].end_ns > narrow_records[last].end_ns) last = p;
    }
    const double wait_us = (double)(r->start_ns - narrow_records[last].end_ns) / 1e3;
    obs->ready_to_start_us[obs->ready_count++] = wait_us;
    if (r->worker < 0 || narrow_records[last].worker < 0) continue;
    if (r->worker == narrow_records[last].worker)
      obs->same_us[obs->same_count++] = wait_us;
    else
      obs->other_us[obs->other_count++] = wait_us;
  }
  obs->first_start_us[run] = (double)(first_start - begin_ns) / 1e3;
  obs->last_end_us[run] = (double)(end_ns - last_end) / 1e3;
}

static void print_line(const struct narrow_peer *peer, const struct options *o,
                       const struct narrow_shape *shape, double work_us, double *times,
                       struct observations *obs) {
  printf("{\"bench\": \"narrow\", \"peer\": \"%s\", \"graph\": \"%s\", \"work_us\": %g, ",
         peer->name, o->graph, work_us);
  if (o->kind == NARROW_TREE)
    printf("\"leaves\": %ld, ", shape->leaves);
  else
    printf("\"width\": %ld, \"steps\": %ld, ", shape->width, shape->steps);
  printf("\"tasks\": %ld, \"depth\": %ld, \"workers\": %d, \"repeats\": %d, \"times_s\": [",
         shape->tasks, shape->depth, o->workers, o->repeats);
  for (int r = 0; r < o->repeats; r++) printf("%s%.6f", r ? ", " : "", times[r]);
  const double elapsed = median(times, o->repeats);
  const double work_s = (double)shape->tasks * work_us * 1e-6;
  const double capacity_s = elapsed * o->workers; /* worker-seconds the run occupied */
  const double runs_tasks = (double)shape->tasks * o->repeats;
  const double same_share =
      obs->same_count + obs->other_count
          ? (double)obs->same_count / (double)(obs->same_count + obs->other_count)
          : 0;
  printf(
      "], \"elapsed_median_s\": %.6f, \"work_s\": %.6f, \"ideal_s\": %.6f, "
      "\"share_of_ideal\": %.4f, \"body_us_mean\": %.3f, \"busy_share\": %.4f, ",
      elapsed, work_s, work_s / o->workers, work_s / capacity_s, obs->busy_ns / runs_tasks / 1e3,
      obs->busy_ns / 1e9 / o->repeats / capacity_s);
  const double ready_median = median(obs->ready_to_start_us, obs->ready_count);
  const double ready_p90 = quantile(obs->ready_to_start_us, obs->ready_count, 0.9);
  printf(
      "\"ready_to_start_us_median\": %.3f, \"ready_to_start_us_p90\": %.3f, "
      "\"same_worker_share\": %.4f, \"ready_to_start_same_us_median\": %.3f, "
      "\"ready_to_start_other_us_median\": %.3f, \"first_start_us_median\": %.3f, "
      "\"after_last_end_us_median\": %.3f, \"tasks_per_worker\": [",
      ready_median, ready_p90, same_share, median(obs->same_us, obs->same_count),
      median(obs->other_us, obs->other_count), median(obs->first_start_us, o->repeats),
      median(obs->last_end_us, o->repeats));
  for (int w = 0; w < obs->worker_slots; w++)
    printf("%s%ld", w ? ", " : "", obs->tasks_per_worker[w]);
  printf("]}\n");
  fflush(stdout);
}

/* The warm-up and timed runs of one work size, then its line. */
static void measure(const struct narrow_peer *peer, const struct options *o,
                    const struct narrow_shape *shape, double work_us) {
  narrow_work_ns = (int64_t)(work_us * 1e3 + 0.5);
  void *prepared = peer->prepare(shape);
  uint64_t *sink_values = checked_malloc((size_t)shape->sink_count * sizeof(uint64_t));
  double *times = checked_malloc((size_t)o->repeats * sizeof(double));
  struct observations obs;
  observations_init(&obs, shape, o->repeats, o->workers);
  for (int r = -1; r < o->repeats; r++) { /* r = -1: the warm-up */
    reset_records(shape->tasks);
    memset(sink_values, 0, (size_t)shape->sink_count * sizeof(uint64_t));
    int64_t begin_ns = 0, end_ns = 0;
    peer->run(prepared, shape, &begin_ns, &end_ns, sink_values);
    check_run(peer, o, shape, sink_values);
    if (r < 0) continue;
    times[r] = (double)(end_ns - begin_ns) / 1e9;
    observe_run(&obs, shape, r, begin_ns, end_ns);
  }
  print_line(peer, o, shape, work_us, times, &obs);
  observations_free(&obs);
  free(times);
  free(sink_values);
  peer->release(prepared);
}

int narrow_main(int argc, char **argv, const struct narrow_peer *peer) {
  struct options o;
  parse(argc, argv, &o);
  struct narrow_shape shape;
  narrow_shape_init(&shape, o.kind, o.width, o.steps, o.leaves);
  narrow_records = aligned_alloc(64, (size_t)shape.tasks * sizeof(struct narrow_record));
  if (!narrow_records) {
    fprintf(stderr, "narrow: out of memory\n");
    return 1;
  }
  peer->start(o.workers);
  for (int i = 0; i < o.work_count; i++) measure(peer, &o, &shape, o.work_us[i]);
  peer->stop();
  free(narrow_records);
  narrow_shape_free(&shape);
  return 0;
}
