/* What the C benchmarks share: stopping loudly on a failed call, a monotonic clock, the
 * comparison qsort needs for medians and percentiles, and the percentile itself. Define
 * BENCH_NAME before including. Inline: a benchmark need not use them all. */
#ifndef GPUFLOW_BENCH_UTIL_H
#define GPUFLOW_BENCH_UTIL_H

#include <gpuflow.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline void check(gf_status status, const char *what) {
  if (status != GF_OK) {
    fprintf(stderr, BENCH_NAME ": %s failed: %s: %s\n", what, gf_status_name(status),
            gf_last_error());
    exit(1);
  }
}
#define CHECK(call) check((call), #call)

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* v sorted ascending; q in [0, 1]: nearest rank. */
static inline double quantile(const double *v, long n, double q) {
  long i = (long)(q * (double)n + 0.5) - 1;
  if (i < 0) i = 0;
  if (i >= n) i = n - 1;
  return v[i];
}

#endif
