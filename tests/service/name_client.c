/* A client of the gpuflow service whose names the test chooses (edges_test.cpp): plain C, the
 * public header and libgpuflow only. The test runs it under whatever file name it wants its
 * program name to be (a symbolic link named `训练任务_模型`, say): the name it connects with is
 * that, unless COMM_HEX sets another.
 *
 *   name_client ENDPOINT hold LEASE_NAME_HEX [COMM_HEX]
 *       Names this process COMM_HEX's bytes first when given (prctl PR_SET_NAME: any bytes, the
 *       kernel keeps 15). Connects, takes a lease of 0.01 CPU named LEASE_NAME_HEX's bytes,
 *       prints "held ID"; at the end of standard input releases it, prints "bye".
 *   name_client ENDPOINT many HELD ENDED NAME_BYTES
 *       Takes and releases ENDED leases of 0.001 CPU one after another, then takes HELD more and
 *       keeps them, each named with NAME_BYTES bytes ("x"s); prints "held HELD"; at the end of
 *       standard input releases them, prints "bye".
 * On a failed call prints "failed MESSAGE" (one line) and exits 3; bad arguments exit 2. */
#define _GNU_SOURCE
#include <gpuflow.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static void fail_with(const char *what) {
  char text[1024];
  snprintf(text, sizeof text, "%s", gf_last_error());
  for (char *p = text; *p; ++p)
    if (*p == '\n') *p = ' ';
  printf("failed %s: %s\n", what, text);
  fflush(stdout);
  exit(3);
}

/* "41420a" -> "AB\n"; NULL on a malformed text. The caller frees. */
static char *from_hex(const char *hex) {
  size_t n = strlen(hex);
  if (n % 2 != 0) return NULL;
  char *out = calloc(n / 2 + 1, 1);
  for (size_t i = 0; i < n / 2; ++i) {
    unsigned byte = 0;
    if (sscanf(hex + 2 * i, "%2x", &byte) != 1) {
      free(out);
      return NULL;
    }
    out[i] = (char)byte;
  }
  return out;
}

static gf_pool *connect_pool(const char *endpoint) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.endpoint = endpoint;
  config.cpu_workers = -1;
  gf_pool *pool = NULL;
  if (gf_pool_create(&pool, &config) != GF_OK) fail_with("connect");
  return pool;
}

static gf_lease *take(gf_pool *pool, double cpus, const char *name) {
  gf_lease_request request = GF_LEASE_REQUEST_INIT;
  request.cpus = cpus;
  request.name = name;
  gf_lease *lease = NULL;
  if (gf_lease_acquire(&lease, pool, &request, 30000) != GF_OK) fail_with("lease");
  return lease;
}

static void wait_for_end_of_input(void) {
  char line[256];
  while (fgets(line, sizeof line, stdin)) {
  }
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[2], "hold") == 0) {
    char *name = from_hex(argv[3]);
    char *comm = argc >= 5 ? from_hex(argv[4]) : NULL;
    if (!name || (argc >= 5 && !comm)) return 2;
    if (comm && prctl(PR_SET_NAME, comm, 0, 0, 0) != 0) return 2;
    gf_pool *pool = connect_pool(argv[1]);
    gf_lease *lease = take(pool, 0.01, name);
    uint64_t id = 0;
    gf_lease_info(&id, NULL, NULL, lease);
    printf("held %llu\n", (unsigned long long)id);
    fflush(stdout);
    wait_for_end_of_input();
    gf_lease_release(lease);
    gf_pool_destroy(pool);
    free(name);
    free(comm);
    printf("bye\n");
    return 0;
  }
  if (argc == 6 && strcmp(argv[2], "many") == 0) {
    const int held = atoi(argv[3]), ended = atoi(argv[4]), name_bytes = atoi(argv[5]);
    if (held < 0 || ended < 0 || name_bytes < 1) return 2;
    char *name = malloc((size_t)name_bytes + 1);
    memset(name, 'x', (size_t)name_bytes);
    name[name_bytes] = '\0';
    gf_pool *pool = connect_pool(argv[1]);
    for (int i = 0; i < ended; ++i) gf_lease_release(take(pool, 0.001, name));
    gf_lease **leases = calloc((size_t)held + 1, sizeof *leases);
    for (int i = 0; i < held; ++i) leases[i] = take(pool, 0.001, name);
    printf("held %d\n", held);
    fflush(stdout);
    wait_for_end_of_input();
    for (int i = 0; i < held; ++i) gf_lease_release(leases[i]);
    gf_pool_destroy(pool);
    free(leases);
    free(name);
    printf("bye\n");
    return 0;
  }
  fprintf(stderr,
          "usage: name_client ENDPOINT hold LEASE_NAME_HEX [COMM_HEX]\n"
          "       name_client ENDPOINT many HELD ENDED NAME_BYTES\n");
  return 2;
}
