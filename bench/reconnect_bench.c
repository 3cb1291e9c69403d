/* How long a connected pool's graphs stop running while its service restarts.
 *
 *   reconnect_bench --serve GPUFLOW_BIN [--rounds R]
 *
 * Spawns `GPUFLOW_BIN serve --backend host --emulated-devices 1 --socket …` (its log goes to
 * /dev/null), connects a pool and runs a graph of one GPU task (so the pool leases the device).
 * Then R times (default 10): the service is killed with SIGKILL and spawned again on the same
 * socket, and the pool submits that graph again and again until a run succeeds (runs fail at once
 * while no service is there). Per round: `listen_ms`, from the kill until the new service accepts
 * on the socket; `after_listen_ms`, from then until a graph has run again (the pool's back-off
 * and handshake, the lease asked for again); `outage_ms`, from the kill until a graph has run.
 * Prints one JSON line with the median and max of each, in milliseconds. Exit 1 on a failure
 * other than the outage's. No timings are asserted. Measure with a Release build. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gpuflow.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(const char *what) {
  fprintf(stderr, "reconnect_bench: %s: %s\n", what, gf_last_error());
  exit(1);
}

static pid_t spawn_service(const char *serve_bin, const char *socket_path) {
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    execl(serve_bin, serve_bin, "serve", "--backend", "host", "--emulated-devices", "1",
          "--cpu-workers", "1", "--socket", socket_path, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Whether a service accepts on the socket (the connection is closed at once). */
static int accepts(const char *socket_path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  const size_t n = strlen(socket_path);
  memcpy(a.sun_path, socket_path, n < sizeof a.sun_path - 1 ? n : sizeof a.sun_path - 1);
  const int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

static int noop_gpu(gf_task_ctx *ctx, void *user_data) {
  (void)ctx;
  (void)user_data;
  return 0;
}

/* GF_OK when a run of `graph` succeeded. */
static gf_status run_once(gf_pool *pool, gf_graph *graph) {
  gf_run *run = NULL;
  gf_status s = gf_graph_submit(&run, pool, graph, NULL);
  if (s != GF_OK) return s;
  s = gf_run_wait(run, 60000);
  gf_run_destroy(run);
  return s;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void print_stat(const char *name, double *v, int n, int last) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  printf("\"%s_median_ms\": %.2f, \"%s_max_ms\": %.2f%s", name, v[n / 2], name, v[n - 1],
         last ? "" : ", ");
}

int main(int argc, char **argv) {
  const char *serve_bin = NULL;
  int rounds = 10;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--serve") && i + 1 < argc) {
      serve_bin = argv[++i];
    } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else {
      serve_bin = NULL;
      break;
    }
  }
  if (!serve_bin || rounds < 1) {
    fprintf(stderr, "usage: reconnect_bench --serve GPUFLOW_BIN [--rounds R]\n");
    return 2;
  }
  char dir[] = "/tmp/gf-reconnect-bench-XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp");
  char socket_path[100], endpoint[120];
  snprintf(socket_path, sizeof socket_path, "%s/gpuflow.sock", dir);
  snprintf(endpoint, sizeof endpoint, "unix://%s", socket_path);

  pid_t service = spawn_service(serve_bin, socket_path);
  for (int tries = 0; !accepts(socket_path); ++tries) {
    if (tries > 2000) die("the service never listened");
    usleep(5000);
  }
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.endpoint = endpoint;
  config.cpu_workers = 1;
  gf_pool *pool = NULL;
  if (gf_pool_create(&pool, &config) != GF_OK) die("gf_pool_create");
  gf_graph *graph = NULL;
  if (gf_graph_create(&graph) != GF_OK) die("gf_graph_create");
  gf_task_desc task = GF_TASK_DESC_INIT;
  task.name = "gpu";
  task.gpu_fn = noop_gpu;
  gf_task t;
  if (gf_graph_add_task(&t, graph, &task) != GF_OK) die("gf_graph_add_task");
  if (run_once(pool, graph) != GF_OK) die("the first run");

  double *listen_ms = calloc((size_t)rounds, sizeof(double));
  double *after_ms = calloc((size_t)rounds, sizeof(double));
  double *outage_ms = calloc((size_t)rounds, sizeof(double));
  long failed_runs = 0;
  for (int r = 0; r < rounds; ++r) {
    const double killed = now_ms();
    kill(service, SIGKILL);
    waitpid(service, NULL, 0);
    service = spawn_service(serve_bin, socket_path);
    while (!accepts(socket_path)) usleep(200);
    const double listening = now_ms();
    for (;;) {
      const gf_status s = run_once(pool, graph);
      if (s == GF_OK) break;
      if (s != GF_ERR_TASK_FAILED && s != GF_ERR_SYSTEM) die("a run during the outage");
      ++failed_runs;
      usleep(1000); /* a caller retrying, not a busy loop that takes the service's core */
      if (now_ms() - listening > 60000) die("no graph ran within 60 s of the restart");
    }
    const double ran = now_ms();
    listen_ms[r] = listening - killed;
    after_ms[r] = ran - listening;
    outage_ms[r] = ran - killed;
  }
  printf("{\"bench\": \"reconnect\", \"rounds\": %d, ", rounds);
  print_stat("listen", listen_ms, rounds, 0);
  print_stat("after_listen", after_ms, rounds, 0);
  print_stat("outage", outage_ms, rounds, 0);
  printf("\"failed_runs\": %ld}\n", failed_runs);
  gf_graph_destroy(graph);
  gf_pool_destroy(pool);
  kill(service, SIGTERM);
  waitpid(service, NULL, 0);
  free(listen_ms);
  free(after_ms);
  free(outage_ms);
  char cleanup[400];
  snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
  return system(cleanup) == 0 ? 0 : 1;
}
