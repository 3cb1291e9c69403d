/* The bare round-trip floor on its own (bench/unix_rtt.h): unix_rtt [N] times N request/answer
 * pairs (default 5000) after 200 untimed ones and prints one JSON line with the median, p90 and
 * p99 in microseconds. lease_bench measures the same floor interleaved with its leases. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#define BENCH_NAME "unix_rtt"
#include "bench_util.h"
#include "unix_rtt.h"

int main(int argc, char **argv) {
  const long n = argc > 1 ? atol(argv[1]) : 5000;
  if (argc > 2 || n < 1) {
    fprintf(stderr, "usage: %s [N >= 1]\n", argv[0]);
    return 2;
  }
  UnixRtt rtt;
  if (unix_rtt_start(&rtt) != 0) {
    perror("unix_rtt: socketpair/fork");
    return 1;
  }
  double *t = malloc((size_t)n * sizeof *t);
  if (!t) return 1;
  for (long i = -200; i < n; i++) {
    const double t0 = now();
    if (unix_rtt_once(&rtt) != 0) {
      fprintf(stderr, "unix_rtt: the echoing process is gone\n");
      return 1;
    }
    if (i >= 0) t[i] = now() - t0;
  }
  unix_rtt_stop(&rtt);
  qsort(t, (size_t)n, sizeof *t, cmp);
  printf(
      "{\"bench\": \"unix_rtt\", \"iters\": %ld, \"median_us\": %.1f, \"p90_us\": %.1f, "
      "\"p99_us\": %.1f}\n",
      n, quantile(t, n, 0.5) * 1e6, quantile(t, n, 0.9) * 1e6, quantile(t, n, 0.99) * 1e6);
  free(t);
  return 0;
}
