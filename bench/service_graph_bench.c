/* service_graph_bench — a graph of N no-op kernel tasks (bench.noop, noop_kernels.so), N
 * independent tasks, submitted to a service and run inside it, against the same graph run in
 * this process on an embedded pool with the plugin loaded here.
 *
 * Usage: service_graph_bench ENDPOINT PLUGIN N REPEATS
 *
 * Times, per repeat: building nothing (the graph is built once), submit (serialize, put the
 * document over the data plane, the service reads and prepares it) and finish (gf_run_wait
 * returns): one wall-clock figure from gf_graph_submit to the end of gf_run_wait. Prints one
 * JSON line with the medians. Uses only the C ABI. The target: N = 1,000,000 in the
 * service in under 2 s. */
#include <gpuflow.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(gf_status s, const char *what) {
  if (s != GF_OK) {
    fprintf(stderr, "service_graph_bench: %s: %s\n", what, gf_last_error());
    exit(1);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static gf_graph *build(long n) {
  gf_graph *g;
  check(gf_graph_create(&g), "gf_graph_create");
  gf_task_desc desc = GF_TASK_DESC_INIT;
  desc.kernel = "bench.noop";
  for (long i = 0; i < n; i++) {
    gf_task t;
    check(gf_graph_add_task(&t, g, &desc), "gf_graph_add_task");
  }
  return g;
}

/* One run of `graph` on `pool`, submitted `where`: seconds from submit to finished. */
static double run_once(gf_pool *pool, gf_graph *graph, gf_run_where where, long n) {
  gf_submit_options o = GF_SUBMIT_OPTIONS_INIT;
  o.where = where;
  gf_run *run;
  const double t0 = now_s();
  check(gf_graph_submit(&run, pool, graph, &o), "gf_graph_submit");
  check(gf_run_wait(run, -1), "gf_run_wait");
  const double t = now_s() - t0;
  gf_run_where got;
  check(gf_run_where_get(&got, run), "gf_run_where_get");
  gf_run_stats stats = GF_RUN_STATS_INIT;
  check(gf_run_stats_get(&stats, run), "gf_run_stats_get");
  if (got != where || stats.succeeded != (uint64_t)n) {
    fprintf(stderr, "service_graph_bench: ran %s, %llu of %ld tasks succeeded\n",
            got == GF_RUN_IN_SERVICE ? "in the service" : "in process",
            (unsigned long long)stats.succeeded, n);
    exit(1);
  }
  gf_run_destroy(run);
  return t;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s ENDPOINT PLUGIN N REPEATS\n", argv[0]);
    return 2;
  }
  const char *endpoint = argv[1], *plugin = argv[2];
  const long n = atol(argv[3]);
  const int repeats = atoi(argv[4]);
  if (n <= 0 || repeats <= 0 || repeats > 100) {
    fprintf(stderr, "service_graph_bench: N and REPEATS must be positive (REPEATS <= 100)\n");
    return 2;
  }
  gf_graph *graph = build(n);

  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.endpoint = endpoint;
  gf_pool *connected;
  check(gf_pool_create(&connected, &c), "gf_pool_create (connected)");
  gf_pool_config e = GF_POOL_CONFIG_INIT;
  e.endpoint = "embedded";
  gf_pool *embedded;
  check(gf_pool_create(&embedded, &e), "gf_pool_create (embedded)");
  check(gf_pool_load_plugin(embedded, plugin), "gf_pool_load_plugin");

  double in_service[100], in_process[100];
  for (int r = 0; r < repeats; r++) { /* interleaved, so both see the same machine */
    in_service[r] = run_once(connected, graph, GF_RUN_IN_SERVICE, n);
    in_process[r] = run_once(embedded, graph, GF_RUN_IN_PROCESS, n);
  }
  const double s = median(in_service, repeats), p = median(in_process, repeats);
  printf(
      "{\"bench\": \"service_graph\", \"tasks\": %ld, \"repeats\": %d, "
      "\"in_service_s\": %.4f, \"in_process_s\": %.4f, \"in_service_tasks_per_s\": %.0f, "
      "\"target_s\": 2.0, \"met\": %s}\n",
      n, repeats, s, p, (double)n / s, s < 2.0 ? "true" : "false");
  gf_pool_destroy(connected);
  gf_pool_destroy(embedded);
  gf_graph_destroy(graph);
  return 0;
}
