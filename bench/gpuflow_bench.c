/* Scheduler-overhead microbenchmark for gpuflow: graphs of (nearly) empty CPU tasks, the same
 * graphs and the same JSON line as ../shared/bench/starpu_bench.c, so that
 *     EXTRA_BENCH=build/bench/gpuflow_bench ../shared/bench/run_peers.sh
 * compares gpuflow with Dask and StarPU in one run.
 *
 * Usage: gpuflow_bench wide|chain|tree N REPEATS
 *   wide : N independent no-op tasks                                            (N tasks)
 *   chain: N tasks, each ordered after the previous (desc.after); each checks that
 *          it runs in order, and the run checks that all N ran                  (N tasks)
 *   tree : N leaves writing an int64 1 into their own 8-byte buffer, then pairwise
 *          sums level by level (inputs: two buffers, output: a new buffer); the
 *          root is fetched and checked == N                                     (2N-1 tasks)
 * Timed region = gf_graph_submit + gf_run_wait. Building the graph (gf_graph_create +
 * gf_graph_add_buffer/add_task) is timed separately as build, and the time spent in
 * gf_graph_submit is reported too (submit_median_s). One warm-up run first, reported apart and
 * not in the medians; its two figures mean what Taskflow's do (../shared/bench/taskflow_bench.cpp):
 *   first_build_s: building the warm-up's graph, the first graph this process builds (cold
 *                  allocator, first touch of the graph's memory);
 *   first_run_s:   gf_graph_submit + gf_run_wait of that graph on the pool just created, which has
 *                  run nothing and learnt nothing of these tasks (Taskflow: the first
 *                  executor.run(flow).wait()). Checking the result and destroying the run and the
 *                  graph are outside both, as in the timed runs.
 * What a user's one-shot graph costs (built once, run once on a fresh pool in a fresh process) is
 * first_build_s + first_run_s; creating the pool (Taskflow: the executor) is in neither, and is
 * reported apart as pool_create_s. first_build_faults and first_run_faults count the process's
 * minor page faults (all threads) during each: how much of the first graph's time went to
 * touching memory for the first time. With --workers or --connected only the first pool's line is
 * a fresh process's: the later pools' warm-ups follow graphs built and run before them.
 * Pool: host backend, one CPU worker per core (GPUFLOW_CPU_WORKERS overrides), no emulated
 * devices; "ncpu" is the number of CPU workers.
 *
 * Options after REPEATS (issue 12, shared pools):
 *   --gpu           the tasks are GPU tasks (gpu_fn only) on D emulated devices, no CPU workers
 *   --mixed         the tasks have both bodies; CPU workers as above plus D emulated devices
 *   --devices D     emulated devices of the embedded pool (default 2; match the service's)
 *   --connected EP  also run on a pool connected to the service at EP, whose devices are held
 *                   through leases; runs alternate embedded/connected (the order flips each
 *                   round) and a second JSON line (peer "gpuflow-connected") gives its figures
 *                   and "vs_embedded", its median tasks/s over the embedded pool's.
 *   --workers 1,2,4 scaling (issue 29): the same runs on one embedded pool per CPU worker count,
 *                   in the order given (CPU bodies only: not with --gpu or --connected); one JSON
 *                   line per count as above ("ncpu" is the count), then a summary line
 *                   {"bench": "scaling", "workers": [...], "tasks_per_s": [...], "vs_first": [...],
 *                   "work_us": U}
 *                   ("vs_first": tasks/s over the first count's).
 *   --work-us U     every task body first keeps its core busy U microseconds (default 0): how
 *                   the pool scales tasks that do some work, beside the no-op figure.
 *   --resources R   every task requests the resources R = NAME=AMOUNT,... (e.g. cpu=1,bigmem=0.25;
 *                   default none), so that placement goes through the workers' ledgers as for
 *                   users' annotated tasks. Each name other than cpu, GPU and gpu_memory is a
 *                   label that the workers able to run the tasks (CPU workers; GPU workers with
 *                   --gpu or --mixed) advertise with capacity 1, or the amount asked where that is
 *                   more, so that every task fits on any of them.
 * All options combine, except --workers with --gpu or --connected. Every line also gives
 * "work_us" and "resources" (R as given, "" for none). */
#define _POSIX_C_SOURCE 200809L
#include <gpuflow.h>

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "gpuflow_bench"
#include "bench_util.h"

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#include "bench_graphs.h"

/* The seconds of a pool's timed runs: the timed region (t), building the graph (build), both
 * (total), and the part of the timed region spent in gf_graph_submit (submit: checking the graph
 * and setting up its run, which no worker can overlap, then queueing its roots, while workers
 * start on them; the rest is gf_run_wait). */
struct series {
  double *t, *build, *total, *submit;
  double first;         /* the untimed warm-up's time: the pool's first run, nothing learnt yet */
  double first_build;   /* building the warm-up's graph */
  double pool_create;   /* gf_pool_create of this pool */
  long first_faults[2]; /* minor page faults of the warm-up's build and of its run */
};

static int series_alloc(struct series *s, int reps) {
  s->t = malloc((size_t)reps * sizeof(double));
  s->build = malloc((size_t)reps * sizeof(double));
  s->total = malloc((size_t)reps * sizeof(double));
  s->submit = malloc((size_t)reps * sizeof(double));
  return s->t && s->build && s->total && s->submit;
}

static void series_free(struct series *s) {
  free(s->t);
  free(s->build);
  free(s->total);
  free(s->submit);
}

/* The process's minor page faults so far (all threads: the workers' faults count too). */
static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* One run; returns the timed seconds and stores the build and submit times. faults: NULL, or
 * where the page faults taken while building and while running go (the warm-up's: a fresh
 * process's first graph touches memory nothing has touched yet). */
static double run_once(gf_pool *pool, const char *kind, long n, double *build, double *submit,
                       long *faults) {
  gf_data root = {0};
  const long f0 = faults ? minor_faults() : 0;
  const double t0 = now();
  gf_graph *graph = !strcmp(kind, "wide")    ? build_wide(n)
                    : !strcmp(kind, "chain") ? build_chain(n)
                                             : build_tree(n, &root);
  double t1 = now();
  long f1 = 0;
  *build = t1 - t0;
  if (faults) { /* read outside both timed intervals */
    f1 = minor_faults();
    t1 = now();
  }
  atomic_store(&chain_next, 0);
  gf_run *run;
  CHECK(gf_graph_submit(&run, pool, graph, NULL));
  const double submitted = now();
  CHECK(gf_run_wait(run, -1));
  const double t2 = now();
  if (faults) {
    faults[0] = f1 - f0;
    faults[1] = minor_faults() - f1;
  }

  if (!strcmp(kind, "chain")) {
    const long ran = atomic_load(&chain_next);
    if (ran != n || atomic_load(&chain_out_of_order)) {
      fprintf(stderr, "gpuflow_bench: chain: %ld of %ld tasks ran%s\n", ran, n,
              atomic_load(&chain_out_of_order) ? ", out of order" : "");
      exit(1);
    }
  } else if (!strcmp(kind, "tree")) {
    int64_t total = 0;
    uint64_t size = 0;
    CHECK(gf_run_fetch(&size, run, root, &total, sizeof total));
    if (total != n) {
      fprintf(stderr, "gpuflow_bench: tree: got %" PRId64 " want %ld\n", total, n);
      exit(1);
    }
  }
  uint64_t tasks = 0;
  CHECK(gf_graph_task_count(&tasks, graph));
  const uint64_t want = !strcmp(kind, "tree") ? (uint64_t)(2 * n - 1) : (uint64_t)n;
  if (tasks != want) {
    fprintf(stderr, "gpuflow_bench: graph has %" PRIu64 " tasks, want %" PRIu64 "\n", tasks, want);
    exit(1);
  }
  gf_run_destroy(run);
  gf_graph_destroy(graph);
  *submit = submitted - t1;
  return t2 - t1;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s wide|chain|tree N REPEATS [--gpu|--mixed] [--devices D] [--connected "
          "ENDPOINT | --workers W1,W2,...] [--work-us U] [--resources NAME=AMOUNT,...]   (N >= 1, "
          "REPEATS >= 1)\n",
          argv0);
  exit(2);
}

#define MAX_RESOURCES 16

/* --resources: the text as given (for the JSON line), what each task requests, and the labels
 * among them that the workers advertise. */
static const char *resources_text = "";
static gf_resource requests[MAX_RESOURCES], labels[MAX_RESOURCES];
static uint32_t label_count;

/* Parses "NAME=AMOUNT,..." into requests and labels; exit 2 naming the option on anything else.
 * Names are kept to printable ASCII without quotes or backslashes, so that the text can go into
 * the JSON line as it is; gpuflow itself checks the rest (names given twice, amounts too small). */
static void parse_resources(const char *text) {
  resources_text = text;
  task_resources = NULL;
  task_resource_count = label_count = 0;
  if (!*text) return;
  char *copy = strdup(text); /* kept: requests and labels point into it until exit */
  if (!copy) exit(1);
  uint32_t k = 0;
  for (char *p = copy; p;) {
    char *next = strchr(p, ',');
    if (next) *next++ = '\0';
    char *eq = strchr(p, '=');
    int ok = eq && eq != p && k < MAX_RESOURCES;
    for (const char *c = p; ok && c < eq; c++) ok = *c > ' ' && *c < 127 && *c != '"' && *c != '\\';
    char *end = NULL;
    const double amount = ok ? strtod(eq + 1, &end) : 0;
    if (!ok || end == eq + 1 || *end || !isfinite(amount) || amount < 0) {
      fprintf(stderr,
              "gpuflow_bench: --resources \"%s\": want NAME=AMOUNT,... (amounts finite and >= 0, "
              "names printable without quotes or backslashes, at most %d of them)\n",
              text, MAX_RESOURCES);
      exit(2);
    }
    *eq = '\0';
    requests[k++] = (gf_resource){p, amount};
    if (strcmp(p, "cpu") && strcmp(p, "GPU") && strcmp(p, "gpu_memory"))
      labels[label_count++] = (gf_resource){p, amount > 1 ? amount : 1};
    p = next;
  }
  task_resources = requests;
  task_resource_count = k;
}

/* cpu_workers: 0 for one per core (or GPUFLOW_CPU_WORKERS). */
static gf_pool *make_pool(const char *endpoint, int devices, int cpu_workers, uint32_t *ncpu,
                          uint32_t *ngpu, double *create_s) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_HOST;
  config.cpu_workers = body_mode == 1 ? -1 : cpu_workers;
  /* CPU workers only by default, like StarPU with STARPU_NCUDA=0 */
  config.emulated_devices = body_mode == 0 ? -1 : devices;
  config.endpoint = endpoint; /* "embedded", or the service (its devices replace ours) */
  /* The labels go on the workers that can run the tasks; a kind without a body needs none. */
  if (body_mode != 1) {
    config.cpu_worker_labels = labels;
    config.cpu_worker_label_count = label_count;
  }
  if (body_mode != 0) {
    config.gpu_worker_labels = labels;
    config.gpu_worker_label_count = label_count;
  }
  gf_pool *pool;
  const double t0 = now();
  CHECK(gf_pool_create(&pool, &config));
  *create_s = now() - t0;
  uint32_t workers = 0;
  *ncpu = *ngpu = 0;
  CHECK(gf_pool_worker_count(&workers, pool));
  for (uint32_t w = 0; w < workers; w++) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    CHECK(gf_pool_worker_info(&info, pool, w));
    if (info.kind == GF_WORKER_CPU) ++*ncpu;
    if (info.kind == GF_WORKER_GPU) ++*ngpu;
  }
  return pool;
}

/* Prints the JSON line of one pool's runs; sorts the series; returns median tasks/s. */
static double print_line(const char *peer, const char *kind, long n, long ntasks, int reps,
                         struct series *s, uint32_t ncpu, uint32_t ngpu, double vs) {
  double *t = s->t;
  printf(
      "{\"peer\": \"%s\", \"graph\": \"%s\", \"n\": %ld, \"tasks\": %ld, \"repeats\": %d, "
      "\"times_s\": [",
      peer, kind, n, ntasks, reps);
  for (int r = 0; r < reps; r++) printf("%s%.6f", r ? ", " : "", t[r]);
  const double med = median(t, reps); /* sorts t */
  const double build_med = median(s->build, reps);
  const double total_med = median(s->total, reps);
  const double submit_med = median(s->submit, reps);
  const double dtasks = (double)ntasks;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf(
      "], \"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, \"build_median_s\": %.6f, "
      "\"total_median_s\": %.6f, \"tasks_per_s\": %.1f, \"us_per_task\": %.3f, "
      "\"total_us_per_task\": %.3f, \"submit_median_s\": %.6f, \"maxrss_mb\": %.1f, "
      "\"first_run_s\": %.6f, \"first_build_s\": %.6f, \"pool_create_s\": %.6f, "
      "\"first_build_faults\": %ld, \"first_run_faults\": %ld, \"ncpu\": %u",
      med, t[0], t[reps - 1], build_med, total_med, dtasks / med, med / dtasks * 1e6,
      total_med / dtasks * 1e6, submit_med, (double)ru.ru_maxrss / 1024.0, s->first, s->first_build,
      s->pool_create, s->first_faults[0], s->first_faults[1], ncpu);
  if (body_mode)
    printf(", \"ngpu\": %u, \"bodies\": \"%s\"", ngpu, body_mode == 1 ? "gpu" : "mixed");
  if (vs > 0) printf(", \"vs_embedded\": %.3f", vs);
  printf(", \"work_us\": %.3f, \"resources\": \"%s\"}\n", (double)work_ns / 1e3, resources_text);
  fflush(stdout);
  return dtasks / med;
}

#define MAX_COUNTS 32

/* --workers "1,2,4": the counts into counts[MAX_COUNTS]; returns how many. Exit 2 naming the
 * option on anything else. */
static int parse_workers(const char *text, int *counts) {
  int k = 0;
  for (const char *p = text;;) {
    char *end;
    const long w = strtol(p, &end, 10);
    if (end == p || w < 1 || w > 4096 || (*end != ',' && *end) || k == MAX_COUNTS) {
      fprintf(stderr,
              "gpuflow_bench: --workers \"%s\": want CPU worker counts from 1 to 4096, separated "
              "by commas, at most %d of them\n",
              text, MAX_COUNTS);
      exit(2);
    }
    counts[k++] = (int)w;
    if (!*end) return k;
    p = end + 1;
  }
}

/* A warm-up, then reps timed runs into s. */
static void time_runs(gf_pool *pool, const char *kind, long n, int reps, struct series *s) {
  double sub;
  s->first = run_once(pool, kind, n, &s->first_build, &sub, s->first_faults);
  for (int r = 0; r < reps; r++) {
    s->t[r] = run_once(pool, kind, n, &s->build[r], &s->submit[r], NULL);
    s->total[r] = s->t[r] + s->build[r];
  }
}

/* --workers: one pool per count, one line each, then the summary line. */
static int scaling(const char *kind, long n, long ntasks, int reps, const int *counts, int k) {
  struct series s;
  double tps[MAX_COUNTS];
  if (!series_alloc(&s, reps)) return 1;
  for (int i = 0; i < k; i++) {
    uint32_t ncpu = 0, ngpu = 0;
    gf_pool *pool = make_pool("embedded", 2, counts[i], &ncpu, &ngpu, &s.pool_create);
    time_runs(pool, kind, n, reps, &s);
    tps[i] = print_line("gpuflow", kind, n, ntasks, reps, &s, ncpu, ngpu, 0);
    gf_pool_destroy(pool);
  }
  printf("{\"bench\": \"scaling\", \"graph\": \"%s\", \"n\": %ld, \"workers\": [", kind, n);
  for (int i = 0; i < k; i++) printf("%s%d", i ? ", " : "", counts[i]);
  printf("], \"tasks_per_s\": [");
  for (int i = 0; i < k; i++) printf("%s%.1f", i ? ", " : "", tps[i]);
  printf("], \"vs_first\": [");
  for (int i = 0; i < k; i++) printf("%s%.3f", i ? ", " : "", tps[i] / tps[0]);
  /* work_us stays last: the smoke test of --work-us matches it at the line's end. */
  printf("], \"resources\": \"%s\", \"work_us\": %.3f}\n", resources_text, (double)work_ns / 1e3);
  series_free(&s);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4 ||
      (strcmp(argv[1], "wide") && strcmp(argv[1], "chain") && strcmp(argv[1], "tree")) ||
      atol(argv[2]) < 1 || atoi(argv[3]) < 1)
    usage(argv[0]);
  const char *kind = argv[1];
  const long n = atol(argv[2]);
  const int reps = atoi(argv[3]);
  const long ntasks = !strcmp(kind, "tree") ? 2 * n - 1 : n;
  int devices = 2, counts[MAX_COUNTS], ncounts = 0;
  const char *connected = NULL;
  for (int i = 4; i < argc; i++) {
    if (!strcmp(argv[i], "--gpu")) {
      body_mode = 1;
    } else if (!strcmp(argv[i], "--mixed")) {
      body_mode = 2;
    } else if (!strcmp(argv[i], "--devices") && i + 1 < argc && atoi(argv[i + 1]) >= 1) {
      devices = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--connected") && i + 1 < argc) {
      connected = argv[++i];
    } else if (!strcmp(argv[i], "--workers") && i + 1 < argc) {
      ncounts = parse_workers(argv[++i], counts);
    } else if (!strcmp(argv[i], "--work-us") && i + 1 < argc && atof(argv[i + 1]) >= 0) {
      work_ns = (long)(atof(argv[++i]) * 1000);
    } else if (!strcmp(argv[i], "--resources") && i + 1 < argc) {
      parse_resources(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (ncounts && (connected || body_mode == 1)) {
    fprintf(stderr, "gpuflow_bench: --workers counts CPU workers: not with --gpu or --connected\n");
    return 2;
  }
  if (ncounts) return scaling(kind, n, ntasks, reps, counts, ncounts);

  /* pools[0]: embedded (private); pools[1]: connected to the service, with --connected. */
  const int npools = connected ? 2 : 1;
  gf_pool *pools[2] = {NULL, NULL};
  uint32_t ncpu[2] = {0, 0}, ngpu[2] = {0, 0};
  double create_s[2] = {0, 0};
  pools[0] = make_pool("embedded", devices, 0, &ncpu[0], &ngpu[0], &create_s[0]);
  /* GPUFLOW_BENCH_SETTLE_S: seconds to wait before timing, so that observers started beside
   * the benchmark (bench/dashboard_overhead.sh) are attached before the runs begin. */
  const char *settle = getenv("GPUFLOW_BENCH_SETTLE_S");
  if (settle && atof(settle) > 0) {
    struct timespec ts = {(time_t)atof(settle),
                          (long)((atof(settle) - (double)(time_t)atof(settle)) * 1e9)};
    nanosleep(&ts, NULL);
  }
  if (connected) {
    pools[1] = make_pool(connected, devices, 0, &ncpu[1], &ngpu[1], &create_s[1]);
    if (ngpu[1] != ngpu[0]) {
      fprintf(stderr,
              "gpuflow_bench: the service has %u device(s), the embedded pool %u: pass --devices "
              "%u\n",
              ngpu[1], ngpu[0], ngpu[1]);
      return 2;
    }
  }

  double sub;
  struct series s[2];
  for (int p = 0; p < npools; p++) {
    if (!series_alloc(&s[p], reps)) return 1;
    s[p].pool_create = create_s[p];
    s[p].first = run_once(pools[p], kind, n, &s[p].first_build, &sub, s[p].first_faults);
  }
  for (int r = 0; r < reps; r++) {
    for (int i = 0; i < npools; i++) {
      const int p = r % 2 ? npools - 1 - i : i; /* the order flips each round */
      s[p].t[r] = run_once(pools[p], kind, n, &s[p].build[r], &s[p].submit[r], NULL);
      s[p].total[r] = s[p].t[r] + s[p].build[r];
    }
  }

  const double embedded = print_line("gpuflow", kind, n, ntasks, reps, &s[0], ncpu[0], ngpu[0], 0);
  if (connected) {
    /* vs_embedded needs the connected median first: print_line computes it, so pass it in. */
    double *copy = malloc((size_t)reps * sizeof(double));
    if (!copy) return 1;
    memcpy(copy, s[1].t, (size_t)reps * sizeof(double));
    const double tasks_per_s = (double)ntasks / median(copy, reps);
    free(copy);
    print_line("gpuflow-connected", kind, n, ntasks, reps, &s[1], ncpu[1], ngpu[1],
               tasks_per_s / embedded);
  }
  for (int p = 0; p < npools; p++) {
    gf_pool_destroy(pools[p]);
    series_free(&s[p]);
  }
  return 0;
}
