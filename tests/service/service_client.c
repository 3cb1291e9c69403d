/* A client of the gpuflow service for the multi-process tests (service_test.cpp): plain C, the
 * public header and libgpuflow only, as a user's program would be. One mode per run, chosen by
 * argv[1]; every mode connects a pool to the endpoint in argv[2].
 *
 *   mix ENDPOINT OUT ITERS GRAPH_EVERY SEED
 *       ITERS times: a lease of 1 or 0.5 GPU (chosen by SEED), held 0-3 ms, released; every
 *       GRAPH_EVERY-th iteration (0: never) also a graph of 4 GPU tasks of 1-2 ms. Writes one
 *       line per lease device ("L pid ordinal share start_ns end_ns") and per GPU task
 *       ("T pid device 1 start_ns end_ns") to OUT, CLOCK_MONOTONIC times taken inside the lease
 *       (after the grant came, before the release is sent) and inside the task body.
 *   flood ENDPOINT OUT THREADS COUNT HOLD_MS CONTROL
 *       THREADS threads take 1-GPU leases, each held HOLD_MS, until COUNT were granted in all.
 *       With CONTROL 1 it prints "connected" and starts when a line comes on standard input,
 *       and also stops when standard input ends. Prints "started" after the first grant, then
 *       "done N" at the end. Writes L lines to OUT. The weight it asks for comes from
 * GPUFLOW_CLIENT_WEIGHT. hold ENDPOINT GPUS QUEUED Takes a lease of GPUS, prints "held ID", then
 * QUEUED more requests of GPUS wait in their own threads; sleeps until killed. acquire ENDPOINT
 * GPUS TIMEOUT_MS Prints "connected", waits for a lease, prints "granted NOW_NS ID" or "failed
 * NOW_NS STATUS MESSAGE"; then releases, destroys the pool, prints "destroyed". With GPUS > 1 also
 * prints "request NOW_NS" just before asking. graph ENDPOINT NTASKS TASK_MS Runs NTASKS independent
 * GPU tasks of TASK_MS each; prints "running" when the first body starts, then "run NOW_NS STATUS
 * MESSAGE" when the run ends, then "destroyed". hold-call ENDPOINT GPUS Takes a lease of GPUS on
 * device 0 (none when GPUS is 0), prints "held ID"; for every line read from standard input checks
 * the connection (status is readable, the lease is not revoked, a 0.5 lease on the last device is
 * granted and released) and prints "ok" or "fail WHAT STATUS MESSAGE"; at the end of input
 * releases, destroys, prints "bye".
 *
 * Exit status: 0 when the mode's work succeeded, 3 when a call failed, 2 for bad arguments. */
#define _POSIX_C_SOURCE 200809L
#include <gpuflow.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *out_file;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void sleep_us(int64_t us) {
  struct timespec t;
  t.tv_sec = (time_t)(us / 1000000);
  t.tv_nsec = (long)(us % 1000000) * 1000;
  while (nanosleep(&t, &t) != 0) {
  }
}

static void say(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *format, ...) {
  va_list args;
  pthread_mutex_lock(&out_mu);
  va_start(args, format);
  vprintf(format, args);
  va_end(args);
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

static void record(char kind, int device, double share, int64_t start, int64_t end) {
  pthread_mutex_lock(&out_mu);
  fprintf(out_file, "%c %d %d %.6f %lld %lld\n", kind, (int)getpid(), device, share,
          (long long)start, (long long)end);
  pthread_mutex_unlock(&out_mu);
}

/* One-line error text (messages may not contain newlines, but be safe), also kept for
 * saved_error(). */
static __thread char error_text[1024];
static const char *last_error(void) {
  char *text = error_text;
  snprintf(text, sizeof error_text, "%s", gf_last_error());
  for (char *p = text; *p; ++p)
    if (*p == '\n') *p = ' ';
  return text;
}

static gf_pool *connect_pool(const char *endpoint) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.endpoint = endpoint;
  config.cpu_workers = -1; /* GPU tasks only */
  config.gpu_worker_threads = 1;
  gf_pool *pool = NULL;
  if (gf_pool_create(&pool, &config) != GF_OK) {
    say("connect-failed %s\n", last_error());
    exit(3);
  }
  return pool;
}

static gf_status acquire(gf_lease **lease, gf_pool *pool, double gpus, int32_t device,
                         int64_t timeout_ms) {
  gf_lease_request request = GF_LEASE_REQUEST_INIT;
  request.gpus = gpus;
  request.name = "service_client";
  if (device >= 0) {
    request.devices = &device;
    request.device_count = 1;
  }
  return gf_lease_acquire(lease, pool, &request, timeout_ms);
}

/* Records every device of the lease from `start` to now. */
static void record_lease(gf_lease *lease, int64_t start) {
  uint64_t id = 0;
  uint32_t count = 0;
  double cpus = 0;
  gf_lease_info(&id, &count, &cpus, lease);
  int64_t end = now_ns();
  for (uint32_t i = 0; i < count; ++i) {
    gf_lease_device d = GF_LEASE_DEVICE_INIT;
    gf_lease_device_info(&d, lease, i);
    record('L', d.ordinal, d.share, start, end);
  }
}

/* ---- GPU task bodies ---- */

typedef struct {
  int64_t sleep_us;
  int announce; /* print "running" when it starts */
} task_args;

static int announced;

static int gpu_body(gf_task_ctx *ctx, void *user_data) {
  const task_args *a = (const task_args *)user_data;
  int64_t start = now_ns();
  gf_task_env env = GF_TASK_ENV_INIT;
  if (gf_task_ctx_env(&env, ctx) != GF_OK) return 1;
  if (a->announce) {
    pthread_mutex_lock(&out_mu);
    int first = !announced;
    announced = 1;
    pthread_mutex_unlock(&out_mu);
    if (first) say("running\n");
  }
  sleep_us(a->sleep_us);
  if (out_file) record('T', env.device, 1.0, start, now_ns());
  return 0;
}

/* A graph of `count` independent GPU tasks; returns gf_run_wait's status. */
static gf_status run_tasks(gf_pool *pool, int count, const task_args *args) {
  gf_graph *graph = NULL;
  if (gf_graph_create(&graph) != GF_OK) return GF_ERR_SYSTEM;
  for (int i = 0; i < count; ++i) {
    gf_task_desc desc = GF_TASK_DESC_INIT;
    desc.gpu_fn = gpu_body;
    desc.user_data = (void *)&args[i];
    gf_task task;
    if (gf_graph_add_task(&task, graph, &desc) != GF_OK) {
      gf_graph_destroy(graph);
      return GF_ERR_SYSTEM;
    }
  }
  gf_run *run = NULL;
  gf_status status = gf_graph_submit(&run, pool, graph, NULL);
  if (status == GF_OK) status = gf_run_wait(run, -1);
  if (status != GF_OK) (void)last_error(); /* kept: the calls below reset it */
  gf_run_destroy(run);
  gf_graph_destroy(graph);
  return status;
}

/* ---- Modes ---- */

static int mode_mix(const char *endpoint, int argc, char **argv) {
  if (argc != 7) return 2;
  out_file = fopen(argv[3], "w");
  if (!out_file) return 2;
  const int iters = atoi(argv[4]);
  const int graph_every = atoi(argv[5]);
  unsigned seed = (unsigned)strtoul(argv[6], NULL, 10);
  gf_pool *pool = connect_pool(endpoint);
  int rc = 0;
  for (int i = 0; i < iters && rc == 0; ++i) {
    const double gpus = rand_r(&seed) % 2 ? 1.0 : 0.5;
    gf_lease *lease = NULL;
    if (acquire(&lease, pool, gpus, -1, -1) != GF_OK) {
      say("fail acquire %s\n", last_error());
      rc = 3;
      break;
    }
    const int64_t start = now_ns();
    sleep_us(rand_r(&seed) % 3000);
    record_lease(lease, start);
    if (gf_lease_release(lease) != GF_OK) {
      say("fail release %s\n", last_error());
      rc = 3;
    }
    if (graph_every > 0 && i % graph_every == graph_every - 1) {
      task_args args[4];
      for (int t = 0; t < 4; ++t) {
        args[t].sleep_us = 1000 + rand_r(&seed) % 1000;
        args[t].announce = 0;
      }
      if (run_tasks(pool, 4, args) != GF_OK) {
        say("fail graph %s\n", last_error());
        rc = 3;
      }
    }
  }
  gf_pool_destroy(pool);
  fclose(out_file);
  if (rc == 0) say("done\n");
  return rc;
}

typedef struct {
  gf_pool *pool;
  int count;
  int64_t hold_us;
  volatile int *stop;
} flood_args;

static int flood_granted, flood_failed;

static void *flood_thread(void *p) {
  flood_args *a = (flood_args *)p;
  for (;;) {
    pthread_mutex_lock(&out_mu);
    int go = !*a->stop && flood_granted < a->count && !flood_failed;
    pthread_mutex_unlock(&out_mu);
    if (!go) break;
    gf_lease *lease = NULL;
    if (acquire(&lease, a->pool, 1.0, -1, -1) != GF_OK) {
      say("fail acquire %s\n", last_error());
      pthread_mutex_lock(&out_mu);
      flood_failed = 1;
      pthread_mutex_unlock(&out_mu);
      break;
    }
    const int64_t start = now_ns();
    pthread_mutex_lock(&out_mu);
    int first = flood_granted++ == 0;
    pthread_mutex_unlock(&out_mu);
    if (first) say("started\n");
    sleep_us(a->hold_us);
    record_lease(lease, start);
    if (gf_lease_release(lease) != GF_OK) {
      say("fail release %s\n", last_error());
      pthread_mutex_lock(&out_mu);
      flood_failed = 1;
      pthread_mutex_unlock(&out_mu);
      break;
    }
  }
  return NULL;
}

static volatile int stdin_closed;

static void *stdin_watch(void *p) {
  (void)p;
  char buffer[256];
  while (read(0, buffer, sizeof buffer) > 0) {
  }
  pthread_mutex_lock(&out_mu);
  stdin_closed = 1;
  pthread_mutex_unlock(&out_mu);
  return NULL;
}

static int mode_flood(const char *endpoint, int argc, char **argv) {
  if (argc != 8) return 2;
  out_file = fopen(argv[3], "w");
  if (!out_file) return 2;
  const int threads = atoi(argv[4]);
  static volatile int never;
  flood_args args;
  args.count = atoi(argv[5]);
  args.hold_us = (int64_t)atoi(argv[6]) * 1000;
  const int control = atoi(argv[7]);
  args.stop = control ? &stdin_closed : &never;
  if (threads < 1 || threads > 64) return 2;
  args.pool = connect_pool(endpoint);
  if (control) { /* a start line, then standard input's end stops it */
    say("connected\n");
    char c = 0;
    while (read(0, &c, 1) == 1 && c != '\n') {
    }
    pthread_t watcher;
    pthread_create(&watcher, NULL, stdin_watch, NULL);
    pthread_detach(watcher);
  }
  pthread_t ids[64];
  for (int i = 0; i < threads; ++i) pthread_create(&ids[i], NULL, flood_thread, &args);
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  gf_pool_destroy(args.pool);
  fclose(out_file);
  if (!flood_failed) say("done %d\n", flood_granted);
  _exit(flood_failed ? 3 : 0); /* the stdin watcher may still be reading */
}

typedef struct {
  gf_pool *pool;
  double gpus;
} queued_args;

static void *queued_thread(void *p) {
  queued_args *a = (queued_args *)p;
  gf_lease *lease = NULL;
  if (acquire(&lease, a->pool, a->gpus, -1, -1) == GF_OK) say("granted-queued\n");
  return NULL;
}

static int mode_hold(const char *endpoint, int argc, char **argv) {
  if (argc != 5) return 2;
  static queued_args args;
  args.gpus = atof(argv[3]);
  const int queued = atoi(argv[4]);
  args.pool = connect_pool(endpoint);
  gf_lease *lease = NULL;
  if (acquire(&lease, args.pool, args.gpus, -1, -1) != GF_OK) {
    say("fail acquire %s\n", last_error());
    return 3;
  }
  uint64_t id = 0;
  gf_lease_info(&id, NULL, NULL, lease);
  say("held %llu\n", (unsigned long long)id);
  for (int i = 0; i < queued; ++i) {
    pthread_t t;
    pthread_create(&t, NULL, queued_thread, &args);
    pthread_detach(t);
  }
  for (;;) pause();
}

static int mode_acquire(const char *endpoint, int argc, char **argv) {
  if (argc != 5) return 2;
  const double gpus = atof(argv[3]);
  const int64_t timeout_ms = atoll(argv[4]);
  gf_pool *pool = connect_pool(endpoint);
  say("connected\n");
  if (gpus > 1) say("request %lld\n", (long long)now_ns());
  gf_lease *lease = NULL;
  gf_status status = acquire(&lease, pool, gpus, -1, timeout_ms);
  if (status == GF_OK) {
    uint64_t id = 0;
    gf_lease_info(&id, NULL, NULL, lease);
    say("granted %lld %llu\n", (long long)now_ns(), (unsigned long long)id);
    gf_lease_release(lease);
  } else {
    say("failed %lld %d %s\n", (long long)now_ns(), (int)status, last_error());
  }
  gf_pool_destroy(pool);
  say("destroyed\n");
  return status == GF_OK ? 0 : 3;
}

static int mode_graph(const char *endpoint, int argc, char **argv) {
  if (argc != 5) return 2;
  const int count = atoi(argv[3]);
  if (count < 1 || count > 100000) return 2;
  task_args *args = calloc((size_t)count, sizeof *args);
  for (int i = 0; i < count; ++i) {
    args[i].sleep_us = (int64_t)atoi(argv[4]) * 1000;
    args[i].announce = 1;
  }
  gf_pool *pool = connect_pool(endpoint);
  gf_status status = run_tasks(pool, count, args);
  say("run %lld %d %s\n", (long long)now_ns(), (int)status, status == GF_OK ? "" : error_text);
  gf_pool_destroy(pool);
  free(args);
  say("destroyed\n");
  return status == GF_OK ? 0 : 3;
}

static int mode_hold_call(const char *endpoint, int argc, char **argv) {
  if (argc != 4) return 2;
  const double gpus = atof(argv[3]);
  gf_pool *pool = connect_pool(endpoint);
  uint32_t devices = 0;
  gf_pool_device_count(&devices, pool);
  gf_lease *lease = NULL;
  uint64_t id = 0;
  if (gpus > 0) {
    if (acquire(&lease, pool, gpus, 0, -1) != GF_OK) {
      say("fail acquire %s\n", last_error());
      return 3;
    }
    gf_lease_info(&id, NULL, NULL, lease);
  }
  say("held %llu\n", (unsigned long long)id);
  char line[256];
  int rc = 0;
  while (fgets(line, sizeof line, stdin)) {
    int32_t revoked = 0;
    gf_bytes status = {NULL, 0};
    gf_lease *other = NULL;
    gf_status s;
    if ((s = gf_pool_service_status(&status, pool, GF_STATUS_JSON)) != GF_OK) {
      say("fail status %d %s\n", (int)s, last_error());
    } else if (gf_bytes_free(&status), lease && (s = gf_lease_revoked(&revoked, lease)) != GF_OK) {
      say("fail revoked-query %d %s\n", (int)s, last_error());
    } else if (revoked) {
      say("fail revoked 0 the lease was revoked\n");
    } else if ((s = acquire(&other, pool, 0.5, (int32_t)devices - 1, 5000)) != GF_OK) {
      say("fail acquire %d %s\n", (int)s, last_error());
    } else if ((s = gf_lease_release(other)) != GF_OK) {
      say("fail release %d %s\n", (int)s, last_error());
    } else {
      say("ok\n");
      continue;
    }
    rc = 3;
  }
  if (lease) gf_lease_release(lease);
  gf_pool_destroy(pool);
  say("bye\n");
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: service_client MODE ENDPOINT ... (see the source)\n");
    return 2;
  }
  const char *mode = argv[1];
  const char *endpoint = argv[2];
  int rc = 2;
  if (strcmp(mode, "mix") == 0) {
    rc = mode_mix(endpoint, argc, argv);
  } else if (strcmp(mode, "flood") == 0) {
    rc = mode_flood(endpoint, argc, argv);
  } else if (strcmp(mode, "hold") == 0) {
    rc = mode_hold(endpoint, argc, argv);
  } else if (strcmp(mode, "acquire") == 0) {
    rc = mode_acquire(endpoint, argc, argv);
  } else if (strcmp(mode, "graph") == 0) {
    rc = mode_graph(endpoint, argc, argv);
  } else if (strcmp(mode, "hold-call") == 0) {
    rc = mode_hold_call(endpoint, argc, argv);
  }
  if (rc == 2) fprintf(stderr, "service_client: bad arguments for mode '%s'\n", mode);
  return rc;
}
