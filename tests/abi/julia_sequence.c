/* julia_sequence.c: the calls of docs/bindings.md's Julia snippet, made the way a Julia program
 * makes them, since no Julia runtime is here to run the snippet itself. The library is opened
 * with dlopen and every function found by name with dlsym (no header macro, no inline helper);
 * the structs are the snippet's own mirrors, filled by the gf_*_init functions and then field by
 * field; the run is waited for through gf_run_fd and poll(2) alone, as FileWatching.poll_fd does.
 * gpuflow.h is included only to check at compile time that the mirrors match its layout.
 * Usage: api_julia_sequence PATH-TO-libgpuflow.so.0. Exit status 0 on success. */
#define _POSIX_C_SOURCE 200809L
#include <gpuflow.h>

#include <dlfcn.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The snippet's CommandDesc and TaskDesc: the header's fields, in order, with plain C types. */
typedef struct {
  uint32_t struct_size;
  const char *const *argv;
  uint32_t argc;
  const char *const *env;
  uint32_t env_count;
  const char *working_dir;
  double timeout_s;
  const char *log_dir;
} command_desc;

typedef struct {
  uint32_t struct_size;
  const char *name;
  void *cpu_fn, *gpu_fn, *user_data, *user_data_destroy, *resources;
  uint32_t resource_count;
  int32_t priority;
  uint32_t retries;
  const uint64_t *inputs;
  uint32_t input_count;
  const uint64_t *outputs;
  uint32_t output_count;
  const uint64_t *after;
  uint32_t after_count;
  const char *kernel;
  const command_desc *command;
  const char *cost_key;
} task_desc;

_Static_assert(sizeof(command_desc) == sizeof(gf_command_desc), "CommandDesc mirrors the header");
_Static_assert(offsetof(command_desc, log_dir) == offsetof(gf_command_desc, log_dir), "log_dir");
_Static_assert(sizeof(task_desc) == sizeof(gf_task_desc), "TaskDesc mirrors the header");
_Static_assert(offsetof(task_desc, command) == offsetof(gf_task_desc, command), "command");
_Static_assert(offsetof(task_desc, cost_key) == offsetof(gf_task_desc, cost_key), "cost_key");

static void *lib;

/* dlsym's object pointer as a function pointer: POSIX guarantees the conversion. */
#define FN(type, name) ((type)(uintptr_t)sym(#name))
static void *sym(const char *name) {
  void *p = dlsym(lib, name);
  if (!p) fprintf(stderr, "julia_sequence: %s not exported: %s\n", name, dlerror());
  return p;
}

static int check(int status, const char *what) {
  if (status == 0) return 0;
  const char *(*last_error)(void) = FN(const char *(*)(void), gf_last_error);
  fprintf(stderr, "julia_sequence: %s: status %d: %s\n", what, status, last_error());
  return 1;
}

int main(int argc, char **argv) {
  lib = dlopen(argc > 1 ? argv[1] : "libgpuflow.so.0", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "julia_sequence: %s\n", dlerror());
    return 1;
  }
  void *pool = NULL, *graph = NULL, *run = NULL;
  if (check(FN(int (*)(void **, const void *, uint32_t), gf_pool_create_versioned)(&pool, NULL, 0),
            "gf_pool_create_versioned") ||
      check(FN(int (*)(void **), gf_graph_create)(&graph), "gf_graph_create"))
    return 1;

  const char *cmd_argv[] = {"sh", "-c", "echo hello from gpuflow"};
  command_desc cmd;
  FN(void (*)(command_desc *, uint32_t), gf_command_desc_init)(&cmd, sizeof cmd);
  cmd.argv = cmd_argv;
  cmd.argc = 3;
  task_desc task;
  FN(void (*)(task_desc *, uint32_t), gf_task_desc_init)(&task, sizeof task);
  task.name = "hello";
  task.command = &cmd;
  uint64_t t = 0;
  if (check(FN(int (*)(uint64_t *, void *, const task_desc *), gf_graph_add_task)(&t, graph, &task),
            "gf_graph_add_task") ||
      check(FN(int (*)(void **, void *, void *, const void *), gf_graph_submit)(&run, pool, graph,
                                                                                NULL),
            "gf_graph_submit"))
    return 1;

  int fd = -1;
  if (check(FN(int (*)(int *, void *), gf_run_fd)(&fd, run), "gf_run_fd")) return 1;
  int (*run_poll)(void *) = FN(int (*)(void *), gf_run_poll);
  int status = 1, slices = 0; /* GF_TIMEOUT until the run is over */
  while ((status = run_poll(run)) == 1 && slices++ < 600) {
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, 100); /* poll_fd(RawFD(fd), 0.1; readable=true) */
  }
  int state = 0;
  FN(int (*)(int *, void *), gf_run_state_get)(&state, run);
  if (check(status, "gf_run_poll") || state != 2 /* GF_RUN_SUCCEEDED */) {
    fprintf(stderr, "julia_sequence: the run ended in state %d\n", state);
    return 1;
  }
  FN(void (*)(void *), gf_run_destroy)(run);
  FN(void (*)(void *), gf_graph_destroy)(graph);
  FN(void (*)(void *), gf_pool_destroy)(pool);
  printf("julia_sequence: the command task succeeded, seen through gf_run_fd\n");
  return 0;
}
