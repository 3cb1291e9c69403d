/* What the C benchmarks share: stopping loudly on a failed call, a monotonic clock, and the
 * comparison qsort needs for medians and percentiles. Define BENCH_NAME before including. */
#ifndef GPUFLOW_BENCH_UTIL_H
#define GPUFLOW_BENCH_UTIL_H

#include <gpuflow.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void check(gf_status status, const char *what) {
  if (status != GF_OK) {
    fprintf(stderr, BENCH_NAME ": %s failed: %s: %s\n", what, gf_status_name(status),
            gf_last_error());
    exit(1);
  }
}
#define CHECK(call) check((call), #call)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
