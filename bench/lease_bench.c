/* Lease round trips against the node's service (issue 12): how long one client waits for
 * gf_lease_acquire + gf_lease_release while K-1 other clients are connected and idle.
 *
 * Usage: lease_bench [--serve GPUFLOW_BIN] [--clients K] [--iters N] [--devices D]
 *   --serve   : spawn `GPUFLOW_BIN serve --backend host --emulated-devices D --socket ...` as a
 *               separate process (as in production; its log goes to /dev/null); without it the
 *               service runs in this process (gf_service_start, log discarded)
 *   --clients : connected clients in all, this one included (default 64); the other K-1 are
 *               separate processes forked before anything else, each holding one connected pool
 *               (no CPU workers) that stays idle until the benchmark ends
 *   --iters   : round trips per kind (default 20000), after 200 untimed ones
 *   --devices : emulated devices the service owns (default 4)
 * Two kinds, interleaved in blocks of 100: a quarter of a device (gpus = 0.25) and one whole
 * device (gpus = 1). Each round trip is timed on its own (CLOCK_MONOTONIC); prints one JSON line
 * per kind with the median, p90, p99 and max in microseconds, and the acquire and release
 * medians. Interleaved with them, blocks of the floor (issue 29): a bare 64-byte request/answer
 * over a unix socket to a forked echoing process (unix_rtt.h), as many as the pairs of one kind;
 * its line comes last, and each kind's line says `vs_floor`, its median over two bare round trips
 * (an acquire and a release are one round trip each). Exit 1 on any failed call. Public ABI
 * only. */
#define _POSIX_C_SOURCE 200809L
#include <gpuflow.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "lease_bench"
#include "bench_util.h"
#include "unix_rtt.h"

static void discard_log(const char *line, void *user_data) {
  (void)line;
  (void)user_data;
}

/* A connected pool with no CPU workers: this process runs nothing, it only talks leases. */
static gf_pool *connect_pool(const char *endpoint) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.endpoint = endpoint;
  config.cpu_workers = -1;
  gf_pool *pool = NULL;
  gf_status status = GF_ERR_SYSTEM;
  for (int tries = 0; tries < 500; tries++) { /* a spawned service may not listen yet */
    status = gf_pool_create(&pool, &config);
    if (status == GF_OK) return pool;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  check(status, "gf_pool_create (connected)");
  return NULL;
}

/* An idle client: connects, says so on `ready`, waits for `hold` to close, disconnects. */
static void idle_client(const char *endpoint, int ready, int hold) {
  gf_pool *pool = connect_pool(endpoint);
  char c = 1;
  if (write(ready, &c, 1) != 1) _exit(1);
  close(ready);
  while (read(hold, &c, 1) < 0 && errno == EINTR) {
  }
  gf_pool_destroy(pool);
  _exit(0);
}

typedef struct {
  double gpus;
  double *round_trip, *acquire, *release;
} Kind;

static void one_trip(gf_pool *pool, Kind *kind, long i) {
  gf_lease_request request = GF_LEASE_REQUEST_INIT;
  request.gpus = kind->gpus;
  gf_lease *lease = NULL;
  const double t0 = now();
  CHECK(gf_lease_acquire(&lease, pool, &request, 1000));
  const double t1 = now();
  CHECK(gf_lease_release(lease));
  const double t2 = now();
  if (i >= 0) {
    kind->round_trip[i] = t2 - t0;
    kind->acquire[i] = t1 - t0;
    kind->release[i] = t2 - t1;
  }
}

/* floor: the bare round trips, sorted. */
static void report(Kind *kind, long n, int clients, int devices, const char *service,
                   const double *floor) {
  qsort(kind->round_trip, (size_t)n, sizeof(double), cmp);
  qsort(kind->acquire, (size_t)n, sizeof(double), cmp);
  qsort(kind->release, (size_t)n, sizeof(double), cmp);
  const double us = 1e6, median = quantile(kind->round_trip, n, 0.5);
  printf(
      "{\"bench\": \"lease\", \"gpus\": %g, \"clients\": %d, \"devices\": %d, \"service\": "
      "\"%s\", \"iters\": %ld, \"median_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, "
      "\"max_us\": %.1f, \"acquire_median_us\": %.1f, \"release_median_us\": %.1f, "
      "\"vs_floor\": %.2f}\n",
      kind->gpus, clients, devices, service, n, median * us,
      quantile(kind->round_trip, n, 0.9) * us, quantile(kind->round_trip, n, 0.99) * us,
      kind->round_trip[n - 1] * us, quantile(kind->acquire, n, 0.5) * us,
      quantile(kind->release, n, 0.5) * us, median / (2 * quantile(floor, n, 0.5)));
}

static void bare_trip(const UnixRtt *rtt, double *t, long i) {
  const double t0 = now();
  if (unix_rtt_once(rtt) != 0) {
    fprintf(stderr, "lease_bench: the echoing process of the floor is gone\n");
    exit(1);
  }
  if (i >= 0) t[i] = now() - t0;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--serve GPUFLOW_BIN] [--clients K >= 1] [--iters N >= 1] "
          "[--devices D >= 1]\n",
          argv0);
  exit(2);
}

int main(int argc, char **argv) {
  const char *serve_bin = NULL;
  int clients = 64, devices = 4;
  long iters = 20000;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) usage(argv[0]);
    if (!strcmp(argv[i], "--serve")) {
      serve_bin = argv[++i];
    } else if (!strcmp(argv[i], "--clients")) {
      clients = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--iters")) {
      iters = atol(argv[++i]);
    } else if (!strcmp(argv[i], "--devices")) {
      devices = atoi(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (clients < 1 || iters < 1 || devices < 1) usage(argv[0]);
  signal(SIGPIPE, SIG_IGN);

  char dir[] = "/tmp/gf-lease-bench-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("lease_bench: mkdtemp");
    return 1;
  }
  char socket_path[128], endpoint[160];
  snprintf(socket_path, sizeof socket_path, "%s/gpuflow.sock", dir);
  snprintf(endpoint, sizeof endpoint, "unix://%s", socket_path);

  /* Children first, before this process starts any thread of its own. */
  pid_t server_pid = -1;
  if (serve_bin) {
    char devices_text[16];
    snprintf(devices_text, sizeof devices_text, "%d", devices);
    server_pid = fork();
    if (server_pid < 0) {
      perror("lease_bench: fork");
      return 1;
    }
    if (server_pid == 0) {
      int null_fd = open("/dev/null", O_RDWR);
      if (null_fd >= 0) {
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
      }
      execl(serve_bin, serve_bin, "serve", "--backend", "host", "--emulated-devices", devices_text,
            "--cpu-workers", "2", "--socket", socket_path, (char *)NULL);
      _exit(127);
    }
  }
  int ready[2], hold[2];
  if (pipe(ready) != 0 || pipe(hold) != 0) {
    perror("lease_bench: pipe");
    return 1;
  }
  gf_service *service = NULL;
  pid_t *idle = calloc((size_t)clients, sizeof(pid_t));
  if (!idle) return 1;
  for (int k = 0; k < clients - 1; k++) {
    idle[k] = fork();
    if (idle[k] < 0) {
      perror("lease_bench: fork");
      return 1;
    }
    if (idle[k] == 0) {
      close(ready[0]);
      close(hold[1]);
      idle_client(endpoint, ready[1], hold[0]);
    }
  }
  close(ready[1]);
  close(hold[0]);
  /* After the idle clients (they must not hold its socket open) and before any thread. */
  UnixRtt rtt;
  if (unix_rtt_start(&rtt) != 0) {
    perror("lease_bench: socketpair/fork");
    return 1;
  }
  if (!serve_bin) { /* after the forks: the idle clients retry until it listens */
    gf_pool_config pool = GF_POOL_CONFIG_INIT;
    pool.backend = GF_BACKEND_HOST;
    pool.emulated_devices = devices;
    pool.cpu_workers = 2;
    gf_service_config config = GF_SERVICE_CONFIG_INIT;
    config.pool = &pool;
    config.socket_path = socket_path;
    config.log = discard_log;
    CHECK(gf_service_start(&service, &config));
  }
  for (int k = 0; k < clients - 1; k++) {
    char c;
    ssize_t got;
    while ((got = read(ready[0], &c, 1)) < 0 && errno == EINTR) {
    }
    if (got != 1) {
      fprintf(stderr, "lease_bench: an idle client failed to connect\n");
      return 1;
    }
  }
  gf_pool *pool = connect_pool(endpoint);

  Kind kinds[2] = {{0.25, NULL, NULL, NULL}, {1.0, NULL, NULL, NULL}};
  for (int k = 0; k < 2; k++) {
    kinds[k].round_trip = malloc((size_t)iters * sizeof(double));
    kinds[k].acquire = malloc((size_t)iters * sizeof(double));
    kinds[k].release = malloc((size_t)iters * sizeof(double));
    if (!kinds[k].round_trip || !kinds[k].acquire || !kinds[k].release) return 1;
  }
  double *floor = malloc((size_t)iters * sizeof(double));
  if (!floor) return 1;
  for (long i = 0; i < 200; i++) { /* warm-up */
    one_trip(pool, &kinds[i % 2], -1);
    bare_trip(&rtt, floor, -1);
  }
  const long block = 100;
  for (long start = 0; start < iters; start += block) {
    const long end = start + block < iters ? start + block : iters;
    for (int k = 0; k < 2; k++)
      for (long i = start; i < end; i++) one_trip(pool, &kinds[k], i);
    for (long i = start; i < end; i++) bare_trip(&rtt, floor, i);
  }
  unix_rtt_stop(&rtt);
  qsort(floor, (size_t)iters, sizeof(double), cmp);
  for (int k = 0; k < 2; k++)
    report(&kinds[k], iters, clients, devices, serve_bin ? "process" : "in-process", floor);
  printf(
      "{\"bench\": \"unix_rtt\", \"iters\": %ld, \"median_us\": %.1f, \"p90_us\": %.1f, "
      "\"p99_us\": %.1f, \"two_median_us\": %.1f}\n",
      iters, quantile(floor, iters, 0.5) * 1e6, quantile(floor, iters, 0.9) * 1e6,
      quantile(floor, iters, 0.99) * 1e6, 2 * quantile(floor, iters, 0.5) * 1e6);
  fflush(stdout);
  free(floor);

  gf_pool_destroy(pool);
  close(hold[1]); /* the idle clients disconnect and exit */
  int failed = 0;
  for (int k = 0; k < clients - 1; k++) {
    int status = 0;
    if (waitpid(idle[k], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failed = 1;
  }
  if (service) gf_service_stop(service);
  if (server_pid > 0) {
    kill(server_pid, SIGTERM);
    int status = 0;
    waitpid(server_pid, &status, 0);
  }
  rmdir(dir);
  for (int k = 0; k < 2; k++) {
    free(kinds[k].round_trip);
    free(kinds[k].acquire);
    free(kinds[k].release);
  }
  free(idle);
  if (failed) fprintf(stderr, "lease_bench: an idle client did not exit cleanly\n");
  return failed;
}
