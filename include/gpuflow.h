/*
 * gpuflow.h — the public C ABI of gpuflow.
 *
 * gpuflow runs graphs of annotated tasks on a pool of devices: CPU workers plus one worker per
 * GPU (real, or emulated by the host backend on machines without one). A caller builds a graph of
 * tasks and data objects, submits it to a pool, and gets back a run: a future it can wait on,
 * poll, watch through a file descriptor, cancel, and fetch results from.
 *
 * Conventions (they hold for every function below unless its comment says otherwise)
 * - Names are gf_<object>_<verb>. Out-parameters come first. Every fallible function returns a
 *   gf_status: GF_OK (0), a positive *expected* outcome (GF_TIMEOUT), or a negative error.
 * - After any call that returns an error, gf_last_error() gives a message on the calling thread
 *   naming the culprit (the task, the field, the struct). The message is owned by the library and
 *   valid until the next gpuflow call on the same thread.
 * - Handles (gf_pool*, gf_graph*, gf_run*) are opaque. A null, destroyed or forged handle is
 *   reported as GF_ERR_INVALID_HANDLE, never a crash. Destroy functions accept NULL and ignore
 *   handles that were already destroyed.
 * - gf_task and gf_data are small value types that name a task or a data object inside one graph.
 *   Using one with another graph is reported as GF_ERR_INVALID_ARGUMENT naming the reference.
 * - Descriptor and config structs begin with struct_size. Initialise them with their _INIT macro
 *   (or gf_*_init function, for bindings), then set the fields you need. Fields are only ever
 *   appended, and every struct_size a release has published stays valid: an input struct is read
 *   as far as the caller's struct_size goes (appended fields take their defaults), an output
 *   struct is written only as far as it goes. Any other struct_size is an error naming the struct.
 * - Strings passed in are copied before the call returns unless stated otherwise.
 * - No C++ exception ever leaves this library; an internal failure becomes GF_ERR_INTERNAL.
 * - Thread safety is stated per function. "Thread-safe" means any thread, concurrently with any
 *   other call on the same object. docs/threading.md gives the full picture.
 */
#ifndef GPUFLOW_H
#define GPUFLOW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Export and version
 * ------------------------------------------------------------------------------------------- */

#if defined(_WIN32)
#define GF_API __declspec(dllimport)
#elif defined(GPUFLOW_BUILDING_LIBRARY)
#define GF_API __attribute__((visibility("default")))
#else
#define GF_API
#endif

/* The version this header describes. A library of another major version refuses to create a
 * pool for code built against this header (GF_ERR_VERSION_MISMATCH). */
#define GF_VERSION_MAJOR 0
#define GF_VERSION_MINOR 10
#define GF_VERSION_PATCH 0
#define GF_VERSION_ENCODE(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define GF_VERSION GF_VERSION_ENCODE(GF_VERSION_MAJOR, GF_VERSION_MINOR, GF_VERSION_PATCH)

/* The version of the library loaded at run time, encoded as GF_VERSION_ENCODE does.
 * Thread-safe. Never fails. */
GF_API uint32_t gf_version(void);

/* The loaded library's version as "major.minor.patch". Static storage. Thread-safe. */
GF_API const char *gf_version_string(void);

/* ---------------------------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------------------------- */

typedef enum gf_status {
  GF_OK = 0,
  /* Expected outcome, not an error: the run has not finished within the timeout. */
  GF_TIMEOUT = 1,

  GF_ERR_INVALID_ARGUMENT = -1, /* a null pointer, out-of-range index, negative amount, ... */
  GF_ERR_INVALID_HANDLE = -2,   /* null, destroyed or forged gf_pool / gf_graph / gf_run */
  GF_ERR_STRUCT_SIZE = -3,      /* a struct_size this library does not know */
  GF_ERR_VERSION_MISMATCH = -4, /* header and library have different major versions */
  GF_ERR_INVALID_GRAPH = -5,    /* cycle, dangling reference, duplicate name, two producers */
  GF_ERR_INFEASIBLE = -6,       /* a task asks for resources no worker of the pool can offer */
  GF_ERR_OUT_OF_MEMORY = -7,    /* device or host memory exhausted */
  GF_ERR_TASK_FAILED = -8,      /* the run finished and at least one task failed */
  GF_ERR_CANCELLED = -9,        /* the run (or the task) was cancelled */
  GF_ERR_STATE = -10,           /* the object is not in a state that allows the call */
  GF_ERR_NOT_FOUND = -11,       /* no such resource, worker, data, ... */
  GF_ERR_SHUT_DOWN = -12,       /* the pool is being destroyed */
  GF_ERR_SYSTEM = -13,          /* the operating system refused (threads, descriptors) */
  GF_ERR_INTERNAL = -14,        /* a bug in gpuflow: please report the message */
  GF_STATUS_FORCE32 = 0x7FFFFFFF
} gf_status;

/* The message describing the last error returned on the calling thread, or "" if the last call
 * succeeded. Never NULL. Owned by the library; valid until the next gpuflow call on this thread.
 * Thread-safe (each thread has its own). */
GF_API const char *gf_last_error(void);

/* A short constant name for a status ("GF_ERR_INFEASIBLE"). Static storage. Thread-safe. */
GF_API const char *gf_status_name(gf_status status);

/* ---------------------------------------------------------------------------------------------
 * Handles and references
 * ------------------------------------------------------------------------------------------- */

typedef struct gf_pool gf_pool;         /* a set of workers and their devices */
typedef struct gf_graph gf_graph;       /* a graph under construction, or frozen after submit */
typedef struct gf_run gf_run;           /* one execution of a graph on a pool: a future */
typedef struct gf_task_ctx gf_task_ctx; /* what a running task body sees; borrowed by the body */

/* A task of one graph. id 0 is never a valid task. */
typedef struct gf_task {
  uint64_t id;
} gf_task;

/* A data object of one graph: a buffer owned by gpuflow, or an opaque value owned by the caller's
 * language runtime. id 0 is never a valid data object. */
typedef struct gf_data {
  uint64_t id;
} gf_data;

/* Releases an object the caller handed over (user data, opaque values). Called at most once, on
 * whichever thread drops the last reference; it must not call back into gpuflow. */
typedef void (*gf_destroy_fn)(void *object);

/* A named amount of a resource. Names are case-sensitive: "GPU", "gpu_memory" (bytes), "cpu",
 * and any user label ("bigmem"). Amounts are finite, non-negative, at most 1e14, and kept in fixed
 * point with 1/10000 resolution, so 0.5 + 0.5 is exactly 1. A positive amount that would round to
 * zero (below 0.00005) is rejected (GF_ERR_INVALID_ARGUMENT naming the resource), never treated as
 * no request; amounts from 0.00005 round to the nearest 1/10000. A zero amount is no request. */
typedef struct gf_resource {
  const char *name;
  double amount;
} gf_resource;

/* ---------------------------------------------------------------------------------------------
 * Pools
 * ------------------------------------------------------------------------------------------- */

typedef enum gf_backend {
  GF_BACKEND_AUTO = 0, /* real GPUs when the CUDA backend finds some, else the host backend */
  GF_BACKEND_HOST = 1, /* emulated devices in host memory: runs anywhere */
  GF_BACKEND_CUDA = 2, /* real GPUs; creation fails if none is usable */
  GF_BACKEND_FORCE32 = 0x7FFFFFFF
} gf_backend;

typedef enum gf_worker_kind {
  GF_WORKER_CPU = 1, /* runs host bodies on host memory */
  GF_WORKER_GPU = 2, /* owns one device (real or emulated); runs GPU bodies on its memory */
  GF_WORKER_KIND_FORCE32 = 0x7FFFFFFF
} gf_worker_kind;

/* Pool configuration. Zero means "default" for every field.
 *
 * Defaults, overridable by environment variables where named (for examples and tests):
 * - cpu_workers: number of CPU cores (GPUFLOW_CPU_WORKERS). Each CPU worker is one thread and
 *   advertises cpu=1 plus cpu_worker_labels.
 * - emulated_devices: host backend only; 2 (GPUFLOW_EMULATED_DEVICES). Use a negative value for
 *   none. Each GPU worker advertises GPU=1, gpu_memory=capacity, plus gpu_worker_labels.
 * - emulated_device_memory: bytes per emulated device; 1 GiB (GPUFLOW_EMULATED_DEVICE_MEMORY);
 *   at most GF_MAX_DATA_SIZE, as is device_memory_limit.
 * - emulated_bandwidth: bytes per second of copies to, from and between emulated devices;
 *   10 GB/s (GPUFLOW_EMULATED_BANDWIDTH); negative: as fast as memcpy. Copies run
 *   asynchronously, one engine per device.
 * - gpu_worker_threads: threads per GPU worker, bounding how many tasks run on it at once; 2.
 * - devices / device_count: CUDA backend only; the device ordinals to use (after
 *   CUDA_VISIBLE_DEVICES, numbered in PCI bus order as nvidia-smi does); NULL: every device.
 * - device_memory_limit: bytes of each device the pool may use; 0: GPUFLOW_DEVICE_MEMORY_LIMIT
 *   when set, else the emulated capacity, or on a real GPU the memory free when the pool
 *   starts, less 5 %.
 * - cpu_worker_labels / gpu_worker_labels: user labels (gf_resource) each worker of that kind
 *   advertises. A label may not be named cpu, GPU or gpu_memory (the pool sets those itself) nor
 *   appear twice in one list; either is rejected naming the label. Amounts follow gf_resource.
 * - spill_threshold: when data on a device passes this fraction of its memory, data no running
 *   or starting task needs is moved to host memory, least recently used first, and brought back
 *   on demand; 0: 0.8 (GPUFLOW_SPILL_THRESHOLD); 1 or more: never spill.
 * - endpoint: the node's shared pool to connect to, "unix:///path/to.sock" or a socket path, or
 *   "tcp://HOST:PORT" for a service on another host (gf_service_config.listen; the token comes
 *   from token_file): such a pool has no GPU workers (the devices are on that host; graphs that
 *   need them run there, see gf_run_where), and its CPU workers are this host's, unleased;
 *   NULL or "": GPUFLOW_POOL when set, else an embedded pool private to this process. "embedded"
 *   forces a private pool whatever GPUFLOW_POOL says. A socket path has at most
 *   GF_MAX_SOCKET_PATH_BYTES, a token_file path at most GF_MAX_PATH_BYTES, and the token in it
 *   at most GF_MAX_TOKEN_BYTES (see "Shared pools"). A tcp:// endpoint is TLS 1.3: the service's
 *   certificate is checked against GPUFLOW_TLS_CA (unset: the system's trust store), and
 *   GPUFLOW_TLS_CERT / GPUFLOW_TLS_KEY name a client certificate (then no token is needed);
 *   "tcp+insecure://HOST:PORT" is plain TCP, for a service that asked for it. A connected pool
 *   takes its devices from the service (the device options above are then ignored); see
 *   "Shared pools". Its weight among its user's own clients (fair share) is
 *   GPUFLOW_CLIENT_WEIGHT when set, a number in (0, 1e6], else 1; anything else is
 *   GF_ERR_INVALID_ARGUMENT naming the variable.
 * - dashboard: "HOST:PORT" to serve the pool's live page (/) and Prometheus metrics (/metrics)
 *   over HTTP on, e.g. "127.0.0.1:8787" (port 0: any free port; gf_pool_dashboard_url tells
 *   which); NULL or "": GPUFLOW_DASHBOARD when set (a pool that cannot bind it, e.g. the
 *   program's second pool, says so on standard error and runs without), else none. "off"
 *   forces none. A host that is no IPv4 address is refused; use 127.0.0.1 unless others must
 *   reach it (docs/dashboard.md).
 */
typedef struct gf_pool_config {
  uint32_t struct_size;
  gf_backend backend;
  int32_t cpu_workers;
  int32_t emulated_devices;
  uint64_t emulated_device_memory;
  double emulated_bandwidth;
  uint32_t gpu_worker_threads;
  const gf_resource *cpu_worker_labels; /* copied; extra resources on every CPU worker */
  uint32_t cpu_worker_label_count;
  const gf_resource *gpu_worker_labels; /* copied; extra resources on every GPU worker */
  uint32_t gpu_worker_label_count;
  const int32_t *devices; /* copied */
  uint32_t device_count;
  uint64_t device_memory_limit;
  double spill_threshold;
  const char *endpoint;  /* copied; appended in 0.2: see "Shared pools" below */
  const char *dashboard; /* copied; appended in 0.3 */
  /* Appended in 0.6: for a "tcp://HOST:PORT" endpoint (a service on another host), a file whose
   * first line is the service's token; NULL or "": GPUFLOW_TOKEN_FILE. Read once, at create. */
  const char *token_file;
} gf_pool_config;

#define GF_POOL_CONFIG_INIT                              \
  {                                                      \
    sizeof(gf_pool_config), /* struct_size */            \
        GF_BACKEND_AUTO,    /* backend */                \
        0,                  /* cpu_workers */            \
        0,                  /* emulated_devices */       \
        0,                  /* emulated_device_memory */ \
        0.0,                /* emulated_bandwidth */     \
        0,                  /* gpu_worker_threads */     \
        NULL,               /* cpu_worker_labels */      \
        0,                  /* cpu_worker_label_count */ \
        NULL,               /* gpu_worker_labels */      \
        0,                  /* gpu_worker_label_count */ \
        NULL,               /* devices */                \
        0,                  /* device_count */           \
        0,                  /* device_memory_limit */    \
        0.0,                /* spill_threshold */        \
        NULL,               /* endpoint */               \
        NULL,               /* dashboard */              \
        NULL                /* token_file */             \
  }

/* Sets *config to GF_POOL_CONFIG_INIT (for bindings that cannot use the macro). Every gf_*_init
 * function takes the size of the caller's struct and writes at most that many bytes, with
 * struct_size set to the size written, so a binding built against an older header is safe.
 * Thread-safe. */
GF_API void gf_pool_config_init(gf_pool_config *config, uint32_t struct_size);

/* Do not call directly: use gf_pool_create, which passes the header's major version. */
GF_API gf_status gf_pool_create_versioned(gf_pool **out, const gf_pool_config *config,
                                          uint32_t header_version_major);

/* Creates a pool and starts its workers. config may be NULL for all defaults.
 * Returns ownership of *out: destroy with gf_pool_destroy. On failure *out is NULL.
 * Errors: GF_ERR_STRUCT_SIZE, GF_ERR_INVALID_ARGUMENT (a field, named), GF_ERR_VERSION_MISMATCH,
 * GF_ERR_SYSTEM (threads). Thread-safe. Pools are independent: several may live in one process. */
static inline gf_status gf_pool_create(gf_pool **out, const gf_pool_config *config) {
  return gf_pool_create_versioned(out, config, GF_VERSION_MAJOR);
}

/* Shuts the pool down: pending tasks of every run are cancelled, running task bodies are waited
 * for (a body that never returns blocks this call), workers are joined and device memory not held
 * by a live gf_run is freed. Runs stay valid handles (finished, cancelled) until destroyed.
 * NULL and already-destroyed pools are ignored. Externally synchronized: no other call may use
 * this pool concurrently or afterwards. */
GF_API void gf_pool_destroy(gf_pool *pool);

/* The address of the pool's dashboard, "http://127.0.0.1:PORT/" with the port it bound
 * (gf_pool_config.dashboard); borrowed, valid until gf_pool_destroy. GF_ERR_NOT_FOUND when the
 * pool serves none. Thread-safe. */
GF_API gf_status gf_pool_dashboard_url(const char **out, const gf_pool *pool);

typedef struct gf_worker_info {
  uint32_t struct_size;
  gf_worker_kind kind;
  int32_t device;    /* device ordinal for GPU workers, -1 for CPU workers */
  uint32_t threads;  /* tasks it can run at once, at most */
  uint32_t emulated; /* 1 when the device is emulated by the host backend */
  const char *name;  /* "cpu:0", "gpu:1"; owned by the pool, valid until it is destroyed */
} gf_worker_info;

/* "No worker": host memory, where an event names a memory space rather than a worker. */
#define GF_NO_WORKER UINT32_MAX

#define GF_WORKER_INFO_INIT                   \
  {                                           \
    sizeof(gf_worker_info), /* struct_size */ \
        GF_WORKER_CPU,      /* kind */        \
        0,                  /* device */      \
        0,                  /* threads */     \
        0,                  /* emulated */    \
        NULL                /* name */        \
  }

/* Number of workers. Thread-safe. */
GF_API gf_status gf_pool_worker_count(uint32_t *out, const gf_pool *pool);

/* Describes worker `worker` (0 <= worker < count). out->struct_size must be set. Thread-safe. */
GF_API gf_status gf_pool_worker_info(gf_worker_info *out, const gf_pool *pool, uint32_t worker);

/* One line of a worker's resource ledger. The invariant the scheduler keeps, and tests check:
 * 0 <= in_use <= capacity at every moment, and in_use returns to 0 once the pool is idle and every
 * run holding data on the worker's device has been destroyed. For "gpu_memory", in_use counts
 * the bytes of data resident on the device plus the gpu_memory reserved by running tasks. */
typedef struct gf_ledger_entry {
  uint32_t struct_size;
  const char *resource; /* owned by the pool, valid until it is destroyed */
  double capacity;
  double in_use;
  double peak_in_use; /* the highest in_use seen since the pool was created */
} gf_ledger_entry;

#define GF_LEDGER_ENTRY_INIT                   \
  {                                            \
    sizeof(gf_ledger_entry), /* struct_size */ \
        NULL,                /* resource */    \
        0.0,                 /* capacity */    \
        0.0,                 /* in_use */      \
        0.0                  /* peak_in_use */ \
  }

/* Number of resources in worker `worker`'s ledger (those it advertises). Thread-safe. */
GF_API gf_status gf_pool_ledger_size(uint32_t *out, const gf_pool *pool, uint32_t worker);

/* Reads ledger line `index` (0 <= index < size) of worker `worker`, a consistent snapshot.
 * out->struct_size must be set. Thread-safe. */
GF_API gf_status gf_pool_ledger_entry(gf_ledger_entry *out, const gf_pool *pool, uint32_t worker,
                                      uint32_t index);

/* Reads the ledger line of resource `resource` on worker `worker`; GF_ERR_NOT_FOUND when the
 * worker does not advertise it. Thread-safe. */
GF_API gf_status gf_pool_ledger_lookup(gf_ledger_entry *out, const gf_pool *pool, uint32_t worker,
                                       const char *resource);

/* ---------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------- */

/* A device of the pool: a real GPU (CUDA backend) or an emulated one (host backend). */
typedef struct gf_device_info {
  uint32_t struct_size;
  int32_t ordinal;       /* the device number gpuflow uses (gf_task_env.device) */
  uint32_t emulated;     /* 1 for host-backend devices */
  uint64_t total_memory; /* bytes the device has */
  uint64_t pool_memory;  /* bytes the pool may use on it (its gpu_memory capacity) */
  int32_t compute_major; /* compute capability; 0 when emulated */
  int32_t compute_minor;
  const char *name;       /* owned by the pool, valid until it is destroyed */
  const char *uuid;       /* "GPU-…" as nvidia-smi prints it; emulated: a stable fake one */
  const char *pci_bus_id; /* "0000:3b:00.0"; "" when emulated */
} gf_device_info;

#define GF_DEVICE_INFO_INIT                     \
  {                                             \
    sizeof(gf_device_info), /* struct_size */   \
        0,                  /* ordinal */       \
        0,                  /* emulated */      \
        0,                  /* total_memory */  \
        0,                  /* pool_memory */   \
        0,                  /* compute_major */ \
        0,                  /* compute_minor */ \
        NULL,               /* name */          \
        NULL,               /* uuid */          \
        NULL                /* pci_bus_id */    \
  }

/* Number of devices the pool drives. Thread-safe. */
GF_API gf_status gf_pool_device_count(uint32_t *out, const gf_pool *pool);

/* Describes device `device` (0 <= device < count). out->struct_size must be set. Thread-safe. */
GF_API gf_status gf_pool_device_info(gf_device_info *out, const gf_pool *pool, uint32_t device);

/* Since 0.9: where the pool's list of devices came from, in words: "CUDA_VISIBLE_DEVICES=1,3",
 * "SLURM_STEP_GPUS=2", "NVIDIA_VISIBLE_DEVICES=all", "all the node shows", or "the service's"
 * (a connected pool). A pool drives exactly the devices handed down to it, the first of these set:
 * CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_JOB_GPUS, NVIDIA_VISIBLE_DEVICES; emulated
 * devices (GPUFLOW_EMULATED_DEVICES of them) by ordinal or fake UUID alike. gf_pool_create
 * refuses a list naming a device that does not exist (GF_ERR_NOT_FOUND, naming the variable and
 * the entry). Owned by the pool, valid until it is destroyed. Thread-safe. */
GF_API gf_status gf_pool_devices_source(const char **out, const gf_pool *pool);

/* *out = 1 when device `from` can copy directly into device `to` (peer access), else 0; data
 * between devices without peer access is staged through pinned host memory. Thread-safe. */
GF_API gf_status gf_pool_peer_access(int *out, const gf_pool *pool, uint32_t from, uint32_t to);

/* Memory of one device as the scheduler accounts it. */
typedef struct gf_device_memory {
  uint32_t struct_size;
  uint64_t capacity;        /* the pool's share of the device */
  uint64_t resident;        /* bytes of data held on the device */
  uint64_t reserved;        /* gpu_memory reserved by running tasks */
  uint64_t spilled;         /* bytes of this device's data currently moved to host memory */
  uint64_t spilled_total;   /* bytes moved to host memory since the pool started */
  uint64_t unspilled_total; /* bytes brought back since the pool started */
} gf_device_memory;

#define GF_DEVICE_MEMORY_INIT                       \
  {                                                 \
    sizeof(gf_device_memory), /* struct_size */     \
        0,                    /* capacity */        \
        0,                    /* resident */        \
        0,                    /* reserved */        \
        0,                    /* spilled */         \
        0,                    /* spilled_total */   \
        0                     /* unspilled_total */ \
  }

/* Reads device `device`'s memory accounting, a consistent snapshot. Thread-safe. */
GF_API gf_status gf_pool_device_memory(gf_device_memory *out, const gf_pool *pool, uint32_t device);

/* ---------------------------------------------------------------------------------------------
 * Graphs
 *
 * A graph is built on one thread (externally synchronized), then submitted any number of times.
 * Submitting freezes it: later additions fail with GF_ERR_STATE. Graphs do not belong to a pool;
 * they are checked against one when submitted.
 * ------------------------------------------------------------------------------------------- */

/* Creates an empty graph. Returns ownership of *out: destroy with gf_graph_destroy.
 * Thread-safe. */
GF_API gf_status gf_graph_create(gf_graph **out);

/* Drops the caller's reference. Runs already submitted keep the graph's contents alive; user data
 * destructors run when the last of them is gone. NULL and destroyed graphs are ignored.
 * Externally synchronized: graph. */
GF_API void gf_graph_destroy(gf_graph *graph);

enum {
  /* Keep this data after its last consumer finished, so gf_run_fetch can read it. Data that no
   * task consumes is always kept. Everything else is freed as soon as its last consumer is done. */
  GF_DATA_KEEP = 1u << 0
};

/* The largest size of a data object, in bytes (1e14, 100 TB): buffer sizes (gf_buffer_desc.size,
 * gf_graph_add_host_buffer, sizes set by gf_task_ctx_output), value size estimates, the declared
 * outputs of one task together, gf_pool_config.emulated_device_memory and device_memory_limit.
 * Device memory is accounted as the resource gpu_memory, whose amounts are at most 1e14; a larger
 * size is rejected with GF_ERR_INVALID_ARGUMENT naming the field or the data. */
#define GF_MAX_DATA_SIZE UINT64_C(100000000000000)

/* A buffer of bytes owned by gpuflow, produced by one task and placed by the scheduler on the
 * device where that task runs. size 0: the producing task sets the size when it runs. size is at
 * most GF_MAX_DATA_SIZE. */
typedef struct gf_buffer_desc {
  uint32_t struct_size;
  const char *name; /* optional, for messages; copied */
  uint64_t size;
  uint32_t flags; /* GF_DATA_* */
} gf_buffer_desc;

#define GF_BUFFER_DESC_INIT                   \
  {                                           \
    sizeof(gf_buffer_desc), /* struct_size */ \
        NULL,               /* name */        \
        0,                  /* size */        \
        0                   /* flags */       \
  }
GF_API void gf_buffer_desc_init(gf_buffer_desc *desc, uint32_t struct_size);

/* Declares a buffer that a task of this graph will produce (one task must list it as output).
 * Externally synchronized: graph. */
GF_API gf_status gf_graph_add_buffer(gf_data *out, gf_graph *graph, const gf_buffer_desc *desc);

/* Declares an opaque value slot (a pointer owned by the caller's language runtime) that a task of
 * this graph will produce with gf_task_ctx_set_value. size_estimate guides scheduling only.
 * Externally synchronized: graph. */
GF_API gf_status gf_graph_add_value(gf_data *out, gf_graph *graph, const char *name,
                                    uint64_t size_estimate, uint32_t flags);

enum {
  /* gf_graph_add_host_buffer: do not copy; the caller keeps `bytes` alive and unchanged until the
   * graph and every run of it are destroyed. Without it the bytes are copied during the call. */
  GF_HOST_BUFFER_BORROW = 1u << 0
};

/* A graph input: `size` bytes of host memory, moved by gpuflow to whichever device consumes them.
 * flags: GF_HOST_BUFFER_BORROW. Externally synchronized: graph. */
GF_API gf_status gf_graph_add_host_buffer(gf_data *out, gf_graph *graph, const char *name,
                                          const void *bytes, uint64_t size, uint32_t flags);

/* A graph input: an opaque value. On success the graph takes ownership and calls
 * destroy(value) (if not NULL) when the graph and all its runs are gone; on failure ownership
 * stays with the caller. Externally synchronized: graph. */
GF_API gf_status gf_graph_add_host_value(gf_data *out, gf_graph *graph, const char *name,
                                         void *value, gf_destroy_fn destroy,
                                         uint64_t size_estimate);

/* A task body. It runs on a worker thread (any thread: see docs/threading.md) and returns 0 on
 * success. Non-zero, or a call to gf_task_ctx_fail, fails this attempt. ctx is borrowed for the
 * duration of the call. A body for GF_WORKER_GPU receives device pointers and (with the CUDA
 * backend) a stream to enqueue work on; on emulated devices the pointers are host memory. Faults
 * of the kernels it enqueued fail the task with CUDA's message. A launch refused at once (a bad
 * configuration, no kernel image) is seen by gpuflow only when the body shares its CUDA runtime;
 * a body built with its own (nvcc links the runtime statically by default) must return it. */
typedef int (*gf_task_fn)(gf_task_ctx *ctx, void *user_data);

/* A task. Exactly one kind of body: C callbacks (cpu_fn and/or gpu_fn), a kernel name, or an
 * external command. The scheduler runs it on a worker whose kind has a body and whose free
 * resources cover `resources`; with both bodies it picks whichever finishes first. */
typedef struct gf_task_desc {
  uint32_t struct_size;
  const char *name;                /* optional; unique among named tasks of the graph; copied */
  gf_task_fn cpu_fn;               /* body for CPU workers, or NULL */
  gf_task_fn gpu_fn;               /* body for GPU workers, or NULL */
  void *user_data;                 /* passed to the body */
  gf_destroy_fn user_data_destroy; /* on success of this call, owns user_data (may be NULL) */
  const gf_resource *resources;    /* copied; held while the task runs; each name at most once */
  uint32_t resource_count;
  int32_t priority;      /* higher runs first among ready tasks; default 0 */
  uint32_t retries;      /* re-run a failing task up to this many times */
  const gf_data *inputs; /* copied; read by the body via gf_task_ctx_input */
  uint32_t input_count;
  const gf_data *outputs; /* copied; each data object has exactly one producer */
  uint32_t output_count;
  const gf_task *after; /* copied; plain ordering edges: run after these tasks */
  uint32_t after_count;
  /* Appended in 0.1 (graphs as files). A caller built without them passes the older
   * struct_size, which stays valid. */
  const char *kernel; /* or a named kernel, resolved against the pool at submit; copied */
  const struct gf_command_desc *command; /* or an external command (see "External commands") */
  /* Appended in 0.1 (cost keys). A caller built without it passes an older struct_size (with or
   * without kernel and command), which stays valid.
   * What the task's running time is learnt under: tasks with the same cost key share one duration
   * estimate per worker kind, learnt from their finished attempts, which placement uses to pick
   * the worker where a task finishes first. Give tasks that do the same kind of work the same
   * key, and different kinds different keys ("normal", "sum", "align"). 1 to 4096 bytes of UTF-8
   * without control characters; copied; written to graph documents. NULL: derived from the task:
   * - the task name's prefix up to its first digit or separator (any ASCII character other than
   *   a letter), after leading ( [ ' " _ and spaces, as Dask's key_split: "inc-123" -> "inc",
   *   "('sum-abc', 0)" -> "sum", "chunk_3_4" -> "chunk";
   * - else (unnamed, or no such prefix) the kernel name, else the command's program (argv[0]);
   * - else one key per body function (cpu_fn, or gpu_fn without one): tasks with C callback
   *   bodies share an estimate when they share the function. */
  const char *cost_key;
} gf_task_desc;

#define GF_TASK_DESC_INIT                         \
  {                                               \
    sizeof(gf_task_desc), /* struct_size */       \
        NULL,             /* name */              \
        NULL,             /* cpu_fn */            \
        NULL,             /* gpu_fn */            \
        NULL,             /* user_data */         \
        NULL,             /* user_data_destroy */ \
        NULL,             /* resources */         \
        0,                /* resource_count */    \
        0,                /* priority */          \
        0,                /* retries */           \
        NULL,             /* inputs */            \
        0,                /* input_count */       \
        NULL,             /* outputs */           \
        0,                /* output_count */      \
        NULL,             /* after */             \
        0,                /* after_count */       \
        NULL,             /* kernel */            \
        NULL,             /* command */           \
        NULL              /* cost_key */          \
  }
GF_API void gf_task_desc_init(gf_task_desc *desc, uint32_t struct_size);

/* Adds a task. Checks what can be checked now (references belong to this graph, resource names are
 * given once each, amounts are valid gf_resource amounts, declared output buffers total at most
 * GF_MAX_DATA_SIZE, a body is given, names and command strings are UTF-8) and names the task and
 * the culprit on error (GF_ERR_INVALID_ARGUMENT); graph-wide checks happen at submit. Limits:
 * docs/limits.md. On failure nothing is added and user_data stays the caller's.
 * Externally synchronized: graph. */
GF_API gf_status gf_graph_add_task(gf_task *out, gf_graph *graph, const gf_task_desc *desc);

/* Adds an ordering edge: `task` runs after `before`. Edges may form a cycle here; submit rejects
 * it. Externally synchronized: graph. */
GF_API gf_status gf_graph_add_dependency(gf_graph *graph, gf_task task, gf_task before);

/* Number of tasks in the graph. Externally synchronized: graph. */
GF_API gf_status gf_graph_task_count(uint64_t *out, const gf_graph *graph);

/* ---------------------------------------------------------------------------------------------
 * Runs
 * ------------------------------------------------------------------------------------------- */

typedef enum gf_run_state {
  GF_RUN_RUNNING = 1,
  GF_RUN_SUCCEEDED = 2,
  GF_RUN_FAILED = 3,    /* finished; at least one task failed */
  GF_RUN_CANCELLED = 4, /* finished after gf_run_cancel or pool shutdown */
  GF_RUN_STATE_FORCE32 = 0x7FFFFFFF
} gf_run_state;

typedef enum gf_task_state {
  GF_TASK_WAITING = 1, /* dependencies not finished */
  GF_TASK_QUEUED = 2,  /* ready, placed on a worker, inputs moving or waiting for resources */
  GF_TASK_RUNNING = 3,
  GF_TASK_SUCCEEDED = 4,
  GF_TASK_FAILED = 5,    /* its body failed (after retries), or a dependency failed */
  GF_TASK_CANCELLED = 6, /* cancelled before it started, or before the retry of a failed attempt */
  GF_TASK_STATE_FORCE32 = 0x7FFFFFFF
} gf_task_state;

/* Called once when the run finishes, on the thread that finished it: a worker thread, a copy
 * engine, or the thread calling gf_run_cancel / gf_run_destroy / gf_pool_destroy. It must not
 * block; it may call any gf_run_* function on `run`, even when the caller has already called
 * gf_run_destroy (the handle then stays valid until the callback returns), and may destroy the
 * run itself. */
typedef void (*gf_run_callback)(gf_run *run, gf_run_state state, void *user_data);

/* Where a graph submitted to a connected pool runs (docs/transport.md, "Graphs in the service").
 * In the service, the node's service runs the whole graph on a pool of its own that leases
 * devices in this process's name: the graph document, literal inputs included, goes there over
 * the data plane, and gf_run_fetch brings kept outputs back over it. Only graphs whose every body
 * is a named kernel the service loaded (gpuflow serve --plugin) or a command can run there (their
 * commands start in this process's working directory, and log to GPUFLOW_LOG_DIR when set: each
 * UTF-8 of at most GF_MAX_PATH_BYTES, else the submit is GF_ERR_INVALID_ARGUMENT naming it), only
 * for processes of the service's own user, and gf_run_value, gf_graph_input_value and C callback
 * bodies stay in-process only. */
typedef enum gf_run_where {
  /* In the service when the pool is connected, the service offers a data plane, and the graph
   * names at least one kernel that the service has and this pool has not, with every other body
   * one of those kernels or a command; split between the two (GF_RUN_SPLIT) when other bodies
   * are only this process's; in this process otherwise. A pool connected to a service on another
   * host (a "tcp://" endpoint) has none of the service's devices: there every graph the service
   * can run (kernels it has, commands) runs there, and in a split graph the tasks that need a
   * device go there too. */
  GF_RUN_ANYWHERE = 0,
  GF_RUN_IN_PROCESS = 1, /* this process's workers, under the service's leases when connected */
  GF_RUN_IN_SERVICE = 2, /* the service, or GF_ERR_INFEASIBLE saying why it cannot */
  /* Only reported (gf_run_where_get), never asked for: a graph that mixes bodies only this
   * process has (C callbacks, its own kernels, commands) with kernels only the service has runs
   * in steps under GF_RUN_ANYWHERE. Each step runs its in-process tasks here and its service
   * kernels there at once; buffers that one side produces for the other move between steps over
   * the data plane (opaque values cannot, and such a graph is refused). */
  GF_RUN_SPLIT = 3,
  GF_RUN_WHERE_FORCE32 = 0x7FFFFFFF
} gf_run_where;

typedef struct gf_submit_options {
  uint32_t struct_size;
  gf_run_callback on_complete; /* optional */
  void *user_data;             /* passed to on_complete */
  gf_run_where where;          /* since 0.5; older sizes: GF_RUN_ANYWHERE */
} gf_submit_options;

#define GF_SUBMIT_OPTIONS_INIT                   \
  {                                              \
    sizeof(gf_submit_options), /* struct_size */ \
        NULL,                  /* on_complete */ \
        NULL,                  /* user_data */   \
        GF_RUN_ANYWHERE        /* where */       \
  }
GF_API void gf_submit_options_init(gf_submit_options *options, uint32_t struct_size);

/* Validates the graph against the pool and starts running it. options may be NULL.
 * Rejected (nothing runs) with GF_ERR_INVALID_GRAPH for a cycle, a dangling input (no producer,
 * not a host input), a data object with two producers, or a duplicate task name; with
 * GF_ERR_INFEASIBLE when no worker of this pool could ever satisfy a task's request (unknown
 * resource, more than any worker has, or no worker of a kind the task has a body for). The message
 * names the task. Several graphs may run on one pool at once, submitted from any threads: they
 * share the workers' ledgers; among ready tasks, higher priority runs first, then older runs, then
 * graph order. Returns ownership of *out: destroy with gf_run_destroy. Thread-safe (the graph
 * must not be modified concurrently). */
GF_API gf_status gf_graph_submit(gf_run **out, gf_pool *pool, gf_graph *graph,
                                 const gf_submit_options *options);

/* Where the run runs: GF_RUN_IN_PROCESS, GF_RUN_IN_SERVICE or GF_RUN_SPLIT. Thread-safe. */
GF_API gf_status gf_run_where_get(gf_run_where *out, gf_run *run);

/* Waits for the run to finish, at most timeout_ms milliseconds (negative: no limit).
 * Returns GF_OK when every task succeeded, GF_TIMEOUT when still running, GF_ERR_TASK_FAILED
 * (message: the first failed task and its error) or GF_ERR_CANCELLED. Thread-safe. */
GF_API gf_status gf_run_wait(gf_run *run, int64_t timeout_ms);

/* gf_run_wait with a zero timeout. Thread-safe. */
GF_API gf_status gf_run_poll(gf_run *run);

/* The run's state. Thread-safe. */
GF_API gf_status gf_run_state_get(gf_run_state *out, gf_run *run);

/* A file descriptor that becomes readable (and stays so) once the run has finished, for poll,
 * epoll or a host event loop (libuv, asyncio). Owned by the run: do not read from or close it; it
 * is closed by gf_run_destroy. Thread-safe. */
GF_API gf_status gf_run_fd(int *out, gf_run *run);

/* Cancels the run: tasks not yet started never start, running bodies finish (and may observe
 * gf_task_ctx_cancelled), then resources and memory are released and the run finishes as
 * GF_RUN_CANCELLED (or as it would have, if it already finished). Thread-safe. */
GF_API gf_status gf_run_cancel(gf_run *run);

/* Cancels the run if still running, then drops the handle. Data still held is freed once no task
 * uses it. NULL and destroyed runs are ignored. Without an on_complete callback the handle is
 * invalid when this returns; with one, it stays valid until the callback (which still runs once,
 * when the bodies still running have returned) has returned. May be called from the run's own
 * on_complete callback. Must be the caller's last call on the run. Externally synchronized: run. */
GF_API void gf_run_destroy(gf_run *run);

/* State of one task. Thread-safe. */
GF_API gf_status gf_run_task_state(gf_task_state *out, gf_run *run, gf_task task);

/* The error text of a failed or cancelled task (*out is "" otherwise). Owned by the run, valid
 * until gf_run_destroy. Thread-safe. */
GF_API gf_status gf_run_task_error(const char **out, gf_run *run, gf_task task);

/* How many attempts the task has made (1 + retries used). Thread-safe. */
GF_API gf_status gf_run_task_attempts(uint32_t *out, gf_run *run, gf_task task);

/* The worker that ran (or is running) the task's last attempt; GF_ERR_STATE if it never started.
 * Thread-safe. */
GF_API gf_status gf_run_task_worker(uint32_t *out, gf_run *run, gf_task task);

/* Copies buffer `data` to host memory at dst (dst_capacity bytes) and sets *out_size to its size.
 * With dst NULL only the size is returned. Works once the producer succeeded, while the run lives,
 * for host inputs and for data that is kept (GF_DATA_KEEP, or consumed by no task).
 * Errors: GF_ERR_STATE (not produced yet, producer failed, or already freed: the message says
 * which), GF_ERR_INVALID_ARGUMENT (dst_capacity too small, or data is an opaque value).
 * Thread-safe. */
GF_API gf_status gf_run_fetch(uint64_t *out_size, gf_run *run, gf_data data, void *dst,
                              uint64_t dst_capacity);

/* The opaque value `data` holds. Borrowed: valid until gf_run_destroy (a device value is pinned in
 * its current form from then on: see gf_task_ctx_set_device_value). Same availability rules as
 * gf_run_fetch. Thread-safe. */
GF_API gf_status gf_run_value(void **out, gf_run *run, gf_data data);

typedef struct gf_run_stats {
  uint32_t struct_size;
  uint64_t tasks;
  uint64_t succeeded;
  uint64_t failed;
  uint64_t cancelled;
  uint64_t attempts;  /* body invocations, retries included */
  uint64_t transfers; /* copies between memory spaces made for this run */
  uint64_t bytes_transferred;
  double elapsed_s; /* from submit to finish (or to now, while running) */
} gf_run_stats;

#define GF_RUN_STATS_INIT                         \
  {                                               \
    sizeof(gf_run_stats), /* struct_size */       \
        0,                /* tasks */             \
        0,                /* succeeded */         \
        0,                /* failed */            \
        0,                /* cancelled */         \
        0,                /* attempts */          \
        0,                /* transfers */         \
        0,                /* bytes_transferred */ \
        0.0               /* elapsed_s */         \
  }

/* Counters of the run so far. out->struct_size must be set. Thread-safe. */
GF_API gf_status gf_run_stats_get(gf_run_stats *out, gf_run *run);

/* ---------------------------------------------------------------------------------------------
 * Inside a task body
 *
 * These functions take the ctx the body was given; they are valid only during that call, on that
 * thread.
 * ------------------------------------------------------------------------------------------- */

/* Input `index` (0-based, in the order of gf_task_desc.inputs): for a buffer, a pointer to its
 * bytes in the executing worker's memory (host memory on CPU workers, device memory on GPU
 * workers) and its size; for an opaque value, the value and its size estimate (for a device
 * value: its current form, on this device when it is here; see gf_task_ctx_set_device_value).
 * Read-only. */
GF_API gf_status gf_task_ctx_input(const void **out_ptr, uint64_t *out_size, gf_task_ctx *ctx,
                                   uint32_t index);

/* Output buffer `index` in the executing worker's memory, to be written by the body. size must
 * equal the declared size, or may be 0 to mean it; an output declared with size 0 gets `size`
 * bytes now. Fails with GF_ERR_OUT_OF_MEMORY if the device cannot hold it. Calling it again returns
 * the same buffer. */
GF_API gf_status gf_task_ctx_output(void **out_ptr, gf_task_ctx *ctx, uint32_t index,
                                    uint64_t size);

/* Sets opaque-value output `index`. On success gpuflow owns `value` and calls destroy(value)
 * (if not NULL) when the data is freed; on failure ownership stays with the caller. */
GF_API gf_status gf_task_ctx_set_value(gf_task_ctx *ctx, uint32_t index, void *value,
                                       gf_destroy_fn destroy, uint64_t size_estimate);

/* How gpuflow moves an opaque value that lives on a device to host memory and back, given with
 * gf_task_ctx_set_device_value. Both functions run on a gpuflow thread (a worker, a copy engine,
 * or a thread calling into gpuflow), never under gpuflow's locks; they must not call back into
 * gpuflow, and must not block on anything a task body of this pool may hold.
 * - spill(value, user_data): returns the value's host form, a new object of the caller's runtime
 *   (for a CuPy array, a NumPy copy), or NULL when it cannot be moved (it then stays on the
 *   device, pinned from then on). gpuflow then destroys the device form.
 * - unspill(host_value, device, user_data): returns a device form on device ordinal `device` (for
 *   a CuPy array, cupy.asarray of the NumPy copy), or NULL on failure (the task that needed it
 *   fails, naming the value). gpuflow then destroys the host form.
 * The value's destroy function (gf_task_ctx_set_device_value) releases whichever form gpuflow
 * holds: the device form, or a form returned by spill or unspill. user_data must stay valid as
 * long as any value given these ops. */
typedef struct gf_value_ops {
  uint32_t struct_size;
  void *(*spill)(void *value, void *user_data);
  void *(*unspill)(void *host_value, int32_t device, void *user_data);
  void *user_data;
} gf_value_ops;

#define GF_VALUE_OPS_INIT                   \
  {                                         \
    sizeof(gf_value_ops), /* struct_size */ \
        NULL,             /* spill */       \
        NULL,             /* unspill */     \
        NULL              /* user_data */   \
  }
GF_API void gf_value_ops_init(gf_value_ops *ops, uint32_t struct_size);

/* Sets opaque-value output `index` to a value that occupies `size` bytes of the executing
 * worker's memory (added in 0.2). On a CPU worker it is gf_task_ctx_set_value (size is the size
 * estimate; ops are ignored). On a GPU worker the value is device data, like a buffer:
 * - `size` bytes (at most GF_MAX_DATA_SIZE) are charged to the device's gpu_memory now, while
 *   the body runs, and stay charged while the value is resident there; they show in the ledger's
 *   gpu_memory line and in gf_pool_device_memory's resident bytes. When they do not fit, gpuflow
 *   first spills other data off the device (waiting for those moves); if that cannot make room
 *   the call fails with GF_ERR_OUT_OF_MEMORY naming the task (ownership stays with the caller).
 * - With ops (spill and unspill both set), the value is listed in the device's spill order and
 *   moved to host memory like a buffer (past the spill threshold, or when a task needs room)
 *   through ops->spill, counted in gf_pool_device_memory's spilled bytes; a task on a GPU worker
 *   that reads it gets it back on its own device through ops->unspill first (charged there). A
 *   task on a CPU worker reads whichever form is current (device or host); it is never moved
 *   for one. A value read by a running task is never moved. ops == NULL, or both functions
 *   NULL: the value is pinned, counted but never spilled (one function without the other is
 *   GF_ERR_INVALID_ARGUMENT). Reading the value back with gf_run_value pins it where it is
 *   then, so the form returned stays valid until gf_run_destroy.
 * - A value on one device read by a task on another is handed over as it is (not moved).
 * On success gpuflow owns `value` and calls destroy (if not NULL) on each form it drops, once
 * per form; the ops are copied. */
GF_API gf_status gf_task_ctx_set_device_value(gf_task_ctx *ctx, uint32_t index, void *value,
                                              gf_destroy_fn destroy, uint64_t size,
                                              const gf_value_ops *ops);

/* Records why this attempt fails (copied). The body should then return non-zero. */
GF_API gf_status gf_task_ctx_fail(gf_task_ctx *ctx, const char *message);

/* 1 once the run was cancelled or the pool is shutting down, so long bodies can stop early. */
GF_API int gf_task_ctx_cancelled(const gf_task_ctx *ctx);

typedef struct gf_task_env {
  uint32_t struct_size;
  gf_worker_kind kind;
  int32_t device;        /* device ordinal, -1 on CPU workers */
  uint32_t worker;       /* index of the executing worker in the pool */
  uint32_t attempt;      /* 1 for the first attempt */
  void *stream;          /* the CUDA stream to enqueue on (cudaStream_t), NULL otherwise */
  const char *task_name; /* borrowed for the call */
} gf_task_env;

#define GF_TASK_ENV_INIT                   \
  {                                        \
    sizeof(gf_task_env), /* struct_size */ \
        GF_WORKER_CPU,   /* kind */        \
        -1,              /* device */      \
        0,               /* worker */      \
        0,               /* attempt */     \
        NULL,            /* stream */      \
        NULL             /* task_name */   \
  }

/* Where and how this body runs. out->struct_size must be set. */
GF_API gf_status gf_task_ctx_env(gf_task_env *out, const gf_task_ctx *ctx);

/* ---------------------------------------------------------------------------------------------
 * Named kernels and plugins
 *
 * A task may name its body ("saxpy", "mylib.normal") instead of giving C callbacks; the name is
 * resolved against the kernels registered with the pool the graph is submitted to. Kernels come
 * from gf_pool_register_kernel or from plugin libraries (gpuflow_plugin.h). A graph naming a
 * kernel the pool does not know is rejected at submit with GF_ERR_NOT_FOUND naming the task and
 * the kernel.
 * ------------------------------------------------------------------------------------------- */

/* A named body. Names are 1 to 255 characters from [A-Za-z0-9_.:/-]. */
typedef struct gf_kernel_desc {
  uint32_t struct_size;
  const char *name;                /* copied */
  gf_task_fn cpu_fn;               /* body for CPU workers, or NULL */
  gf_task_fn gpu_fn;               /* body for GPU workers, or NULL; at least one of the two */
  void *user_data;                 /* passed to both bodies */
  gf_destroy_fn user_data_destroy; /* on success the pool owns user_data (may be NULL) */
} gf_kernel_desc;

#define GF_KERNEL_DESC_INIT                         \
  {                                                 \
    sizeof(gf_kernel_desc), /* struct_size */       \
        NULL,               /* name */              \
        NULL,               /* cpu_fn */            \
        NULL,               /* gpu_fn */            \
        NULL,               /* user_data */         \
        NULL                /* user_data_destroy */ \
  }
GF_API void gf_kernel_desc_init(gf_kernel_desc *desc, uint32_t struct_size);

/* Registers a kernel with the pool. A name can be registered once per pool (GF_ERR_INVALID_ARGUMENT
 * naming it the second time): runs already submitted keep using what they resolved. user_data is
 * destroyed when the pool and every run submitted to it are gone; on failure it stays the
 * caller's. Thread-safe. */
GF_API gf_status gf_pool_register_kernel(gf_pool *pool, const gf_kernel_desc *desc);

/* Loads the plugin library at `path` (dlopen; a name without '/' is searched as dlopen does) and
 * lets it register its kernels (gpuflow_plugin.h). The library stays loaded until the pool is
 * destroyed. Errors, each naming the path: GF_ERR_NOT_FOUND (no such file, or it does not export
 * gf_plugin_describe), GF_ERR_VERSION_MISMATCH (built for another plugin ABI version),
 * GF_ERR_INVALID_ARGUMENT (not a loadable library, or a kernel it registers is invalid or taken);
 * kernels registered before a failure stay registered. Thread-safe. */
GF_API gf_status gf_pool_load_plugin(gf_pool *pool, const char *path);

/* Number of kernels registered with the pool. Thread-safe. */
GF_API gf_status gf_pool_kernel_count(uint32_t *out, const gf_pool *pool);

/* Name of kernel `index` (0 <= index < count), in registration order. Owned by the pool, valid
 * until it is destroyed. Thread-safe. */
GF_API gf_status gf_pool_kernel_name(const char **out, const gf_pool *pool, uint32_t index);

/* ---------------------------------------------------------------------------------------------
 * External commands
 *
 * A task body may be a command line, run as a child process on the worker that runs the task.
 * A command task that requests "GPU" or "gpu_memory" runs on GPU workers only, any other on CPU
 * workers only. The child inherits the pool process's environment plus `env`, and
 * CUDA_VISIBLE_DEVICES and GPUFLOW_DEVICES name the device it was given: the device's UUID
 * (or its ordinal when it has none, as emulated devices) and the gpuflow ordinal; both are empty
 * on CPU workers. GPUFLOW_TASK_NAME and GPUFLOW_ATTEMPT are set too. stdin is /dev/null; stdout
 * and stderr go to <log_dir>/<run>/<task>.out and <task>.err (".<attempt>" appended after the
 * first attempt), where <run> names the run: run-<submit time as YYYYmmdd-HHMMSS, UTC>-<process
 * id>-<pool number in the process>.<run number in the pool>, so runs of one graph, one after
 * another or at once, never overwrite each other's logs. <task> is the task's name, with
 * "@<task index>" appended when the name is not a plain file name (docs/graph-format.md), and
 * task@<index> for an unnamed task. Exit status 0 is success; otherwise the
 * task fails with a message naming the task, the exit code or signal and the log path. On timeout
 * or cancellation the child's process group gets SIGTERM, then SIGKILL two seconds later.
 * ------------------------------------------------------------------------------------------- */

typedef struct gf_command_desc {
  uint32_t struct_size;
  const char *const *argv; /* copied; argv[0] is searched in PATH */
  uint32_t argc;           /* at least 1 */
  const char *const *env;  /* copied; "NAME=value" entries added to the inherited environment */
  uint32_t env_count;
  const char *working_dir; /* copied; NULL: the pool process's working directory */
  double timeout_s;        /* per attempt; 0: none */
  const char *log_dir;     /* copied; NULL: $GPUFLOW_LOG_DIR, else ${TMPDIR:-/tmp}/gpuflow-logs;
                              created when missing */
} gf_command_desc;

#define GF_COMMAND_DESC_INIT                   \
  {                                            \
    sizeof(gf_command_desc), /* struct_size */ \
        NULL,                /* argv */        \
        0,                   /* argc */        \
        NULL,                /* env */         \
        0,                   /* env_count */   \
        NULL,                /* working_dir */ \
        0.0,                 /* timeout_s */   \
        NULL                 /* log_dir */     \
  }
GF_API void gf_command_desc_init(gf_command_desc *desc, uint32_t struct_size);

/* ---------------------------------------------------------------------------------------------
 * Graphs as files
 *
 * A graph whose bodies are kernel names or commands can be written to a self-contained document
 * and read back, in another process or language: a FlatBuffers buffer (file identifier "GFLW",
 * schema src/serialize/graph.fbs, docs/graph-format.md) or the same schema as JSON text.
 * Everything a graph holds survives the round trip: tasks (names, bodies, resources, priorities,
 * retries, command timeouts), data objects (sizes, flags), host buffer inputs (their bytes),
 * edges and metadata. Tasks with C callback bodies and opaque host values cannot be written.
 * ------------------------------------------------------------------------------------------- */

typedef enum gf_graph_format {
  GF_GRAPH_FORMAT_AUTO = 0,   /* deserialize: JSON when the text starts with '{', else binary */
  GF_GRAPH_FORMAT_BINARY = 1, /* FlatBuffers, file identifier "GFLW" */
  GF_GRAPH_FORMAT_JSON = 2,   /* the same schema as JSON text */
  GF_GRAPH_FORMAT_FORCE32 = 0x7FFFFFFF
} gf_graph_format;

/* Bytes returned by the library. Owned by the caller: release with gf_bytes_free. */
typedef struct gf_bytes {
  void *data; /* JSON text is also NUL-terminated (not counted in size) */
  uint64_t size;
} gf_bytes;

/* Frees bytes->data and sets it to NULL and size to 0. NULL and empty bytes are ignored.
 * Thread-safe. */
GF_API void gf_bytes_free(gf_bytes *bytes);

/* Sets (or replaces) a metadata entry of the graph: free-form key/value strings kept with it and
 * written with it, for engines and people ("workflow", "snakemake rule"). Keys are non-empty;
 * keys and values are UTF-8.
 * Externally synchronized: graph. */
GF_API gf_status gf_graph_set_metadata(gf_graph *graph, const char *key, const char *value);

/* Number of metadata entries. Externally synchronized: graph. */
GF_API gf_status gf_graph_metadata_count(uint32_t *out, const gf_graph *graph);

/* Entry `index` (0 <= index < count), in the order keys were first set. Owned by the graph, valid
 * until it is destroyed or the entry is replaced. Externally synchronized: graph. */
GF_API gf_status gf_graph_metadata_get(const char **out_key, const char **out_value,
                                       const gf_graph *graph, uint32_t index);

/* Writes the graph as `format` (not AUTO) into *out, a new library-owned allocation handed to the
 * caller (gf_bytes_free). Errors: GF_ERR_INVALID_ARGUMENT naming the first task with a C callback
 * body or the first opaque host value, or a graph whose document would exceed 2 GiB. The graph
 * is not frozen. Externally synchronized: graph. */
GF_API gf_status gf_graph_serialize(gf_bytes *out, const gf_graph *graph, gf_graph_format format);

enum {
  /* gf_graph_deserialize: leave the graph open for additions; the graph-wide checks (cycles,
   * dangling inputs, duplicate names) then happen at submit instead. */
  GF_DESERIALIZE_MUTABLE = 1u << 0
};

/* Reads a graph from `size` bytes at `bytes` (untrusted input is fine: every buffer is verified,
 * then checked for indices in range, sane sizes and counts, valid UTF-8 names, a bounded
 * expansion (what it describes, shared parts counted once per use, at most 32 x its size +
 * 16 MiB: docs/limits.md), and, unless GF_DESERIALIZE_MUTABLE, for cycles and dangling inputs;
 * the graph is then frozen, ready to submit any number of times). `bytes` is not retained.
 * Returns ownership of *out: destroy with gf_graph_destroy; on failure *out is NULL. Errors:
 * GF_ERR_INVALID_GRAPH with a message saying what is wrong and where ("task #3 'b': input #0
 * refers to data #99; the graph has 4"), GF_ERR_VERSION_MISMATCH for a newer format version.
 * Thread-safe. */
GF_API gf_status gf_graph_deserialize(gf_graph **out, const void *bytes, uint64_t size,
                                      gf_graph_format format, uint32_t flags);

/* The task at position `index` (0 <= index < gf_graph_task_count) in the order tasks were added,
 * which for a deserialized graph is the document's order: how a caller reaches the tasks of a
 * graph it did not build. Externally synchronized: graph. */
GF_API gf_status gf_graph_task_at(gf_task *out, const gf_graph *graph, uint64_t index);

/* Number of data objects in the graph. Externally synchronized: graph. */
GF_API gf_status gf_graph_data_count(uint64_t *out, const gf_graph *graph);

/* The data object at position `index` (0 <= index < count), in the order they were added (the
 * document's order), e.g. to fetch a kept result of a deserialized graph. Externally
 * synchronized: graph. */
GF_API gf_status gf_graph_data_at(gf_data *out, const gf_graph *graph, uint64_t index);

/* Checks the graph against the pool exactly as gf_graph_submit does (and freezes it), without
 * running anything: kernels resolve, requests are feasible. Thread-safe (the graph must not be
 * modified concurrently). */
GF_API gf_status gf_graph_check(gf_graph *graph, gf_pool *pool);

/* ---------------------------------------------------------------------------------------------
 * Events
 *
 * One stream of what happens on a pool, for progress displays, traces and metrics: task attempts
 * starting and finishing on workers, and data moved between memory spaces (copies to where a task
 * runs, spills to host). Kinds may be added in later minor versions: ignore kinds you do not know.
 * ------------------------------------------------------------------------------------------- */

typedef enum gf_event_kind {
  GF_EVENT_TASK_STARTED = 1,  /* a body is about to run on `worker` */
  GF_EVENT_TASK_FINISHED = 2, /* it returned; `ok` tells success */
  /* Since 0.3: a copy of `data` (`bytes`) into `worker`'s memory ended (`ok`), from
   * `source_worker`'s; either is GF_NO_WORKER for host memory. Brings inputs to where a task
   * runs, and spilled data back to a device. `task` is unset (id 0). */
  GF_EVENT_TRANSFER_FINISHED = 3,
  /* Since 0.3: `data` (`bytes`) left `worker`'s device memory for host memory (`ok`); `task` is
   * unset. A spill that only dropped a device copy because another copy exists takes no time
   * and is reported with duration_s 0. */
  GF_EVENT_SPILL_FINISHED = 4,
  GF_EVENT_KIND_FORCE32 = 0x7FFFFFFF
} gf_event_kind;

typedef struct gf_event {
  uint32_t struct_size; /* set by the library; fields are only appended */
  gf_event_kind kind;
  gf_run *run;
  gf_task task;
  uint32_t worker;
  uint32_t attempt;
  int32_t ok;             /* GF_EVENT_TASK_FINISHED: 1 when the attempt succeeded */
  double time_s;          /* steady clock, seconds since the pool was created */
  const char *task_name;  /* borrowed for the call; "" when unnamed */
  double duration_s;      /* appended in 0.3; GF_EVENT_TASK_FINISHED: the attempt's run time */
  double queue_wait_s;    /* appended in 0.3: from ready in its worker's queue to started
                           * (measured while an event callback or a dashboard is set; else 0) */
  gf_data data;           /* appended in 0.3: the data moved (transfers and spills; else id 0) */
  uint64_t bytes;         /* appended in 0.3: its size (transfers and spills) */
  uint32_t source_worker; /* appended in 0.3: where a transfer copied from (GF_NO_WORKER: host) */
} gf_event;

/* Receives events on the thread where they happen (worker threads). It must be quick, must not
 * block and must not destroy the run or the pool. */
typedef void (*gf_event_fn)(const gf_event *event, void *user_data);

/* Sets the pool's event callback (NULL: none). It applies to events after the call returns; a
 * previous callback may still be finishing a call on another thread. Thread-safe. */
GF_API gf_status gf_pool_set_event_callback(gf_pool *pool, gf_event_fn callback, void *user_data);

/* ---------------------------------------------------------------------------------------------
 * Shared pools: the node's service and leases
 *
 * One service per node (`gpuflow serve`, or gf_service_start) owns the devices and one ledger of
 * them; processes connect through gf_pool_config.endpoint or GPUFLOW_POOL. Who a client is comes
 * from the socket's peer credentials (uid, pid), never from what it says. A lease is a grant of
 * devices (whole, or a share of one) and CPUs that its holder may use until it releases it; the
 * service also releases it when the holder's connection closes, whatever ended the holder.
 * Waiting requests are served by weighted fair share between users, then between each user's
 * clients, with reservation and backfill so that large requests are not starved
 * (docs/service.md).
 *
 * Since 0.10 a connected pool rides through a restart of its service (systemctl restart, a package
 * upgrade, the service killed and started again): when the connection ends, the pool dials the
 * same endpoint again, at first after 50 ms and then at most a second apart, until a service
 * with the same devices answers. Meanwhile calls that need the service fail at once with
 * GF_ERR_SYSTEM naming the endpoint and the outage, and tasks that wait for a device or CPU fail
 * the same way; tasks already running go on. The restarted service keeps the leases of this
 * process while it runs, and the pool takes them back when it reconnects (its own and every
 * gf_lease of it). A pool created by the service for graphs it runs does not reconnect.
 *
 * Bounds on what a client sends the service are part of this ABI. The library checks every call
 * against them before anything is sent: past one, the call returns GF_ERR_INVALID_ARGUMENT and
 * gf_last_error() names the field and the bound ("gf_lease_request.name is 5000 bytes; at most
 * GF_MAX_LEASE_NAME_BYTES (4096)"). The service holds every client to the same bounds: a
 * request past one (from a client of another build, or hand-made) is refused alone, with an
 * answer for that request; the client's connection and its leases stay. Sizes are bytes, the
 * terminating NUL not counted; names are UTF-8.
 * ------------------------------------------------------------------------------------------- */

/* gf_lease_request.name: UTF-8 text of at most this many bytes. */
#define GF_MAX_LEASE_NAME_BYTES 4096
/* gf_lease_request.devices: at most this many ordinals, each listed at most once. */
#define GF_MAX_LEASE_DEVICES 1024
/* A unix socket's path: gf_pool_config.endpoint (after "unix://") and
 * gf_service_config.socket_path; what a sockaddr_un holds on Linux. */
#define GF_MAX_SOCKET_PATH_BYTES 107
/* Other paths: gf_pool_config.token_file, gf_service_config.token_file, and the working directory
 * and GPUFLOW_LOG_DIR that a graph run in the service takes along for its commands (absolute
 * UTF-8 paths; see gf_run_where). */
#define GF_MAX_PATH_BYTES 4096
/* A token, the first line of a token file (gf_service_config.token_file), on both ends: a longer
 * one stops the service from starting, and a client refuses to send it. */
#define GF_MAX_TOKEN_BYTES 4096

typedef struct gf_service gf_service;
typedef struct gf_lease gf_lease;

/* Called with each line the service logs (connects, disconnects, leases, refusals), from the
 * service's own thread. It must not call into the service. */
typedef void (*gf_log_fn)(const char *line, void *user_data);

/* Service configuration. Zero means "default" for every field.
 * - pool: the devices to serve (backend, devices, emulated_devices, emulated_device_memory,
 *   emulated_bandwidth, device_memory_limit, cpu_workers as the CPUs to lease); NULL: defaults.
 * - socket_path: the unix socket to listen on, at most GF_MAX_SOCKET_PATH_BYTES; NULL:
 *   $XDG_RUNTIME_DIR/gpuflow.sock, else /tmp/gpuflow-$UID/gpuflow.sock (the directory made
 *   0700). A stale socket file (nothing listening) is replaced; a live one is GF_ERR_STATE
 *   naming it.
 * - group: NULL: the socket is 0600, the service owner's only; a group name: 0660 and owned by
 *   that group, for a node-wide service.
 * - usage_half_life_s: how fast past use is forgotten by fair share; 0: 300 s.
 * - client_gpu_cap / user_gpu_cap: GPUs one client / one user may hold at once; 0: no cap.
 * - log / log_user_data: where log lines go; NULL: standard error.
 * - user_weights: fair-share weights of users, "alice=3,bob=1,1001=2" (names or uids); users
 *   not listed weigh 1. Each user's clients share that user's part. NULL: all 1. */
typedef struct gf_service_config {
  uint32_t struct_size;
  const gf_pool_config *pool;
  const char *socket_path;
  const char *group;
  double usage_half_life_s;
  double client_gpu_cap;
  double user_gpu_cap;
  gf_log_fn log;
  void *log_user_data;
  const char *user_weights;
  const char
      *dashboard; /* appended in 0.3: "HOST:PORT" for the live page and /metrics; NULL: none */
  /* Appended in 0.5: kernel plugin libraries (paths) whose kernels graphs run inside the service
   * may name (gf_run_where); each is loaded once at start to check it. */
  const char *const *plugins;
  uint32_t plugin_count;
  /* Appended in 0.6: remote clients. listen: "HOST:PORT" (IPv4; port 0: any free one,
   * gf_service_remote_endpoint tells which) to accept clients of other hosts on over TCP; NULL or
   * "": none. token_file: the token they must show, the file's first line (created, mode 0600,
   * with a random token when missing; refused when others may read it; its path at most
   * GF_MAX_PATH_BYTES, the token at most GF_MAX_TOKEN_BYTES). A token holder gets the
   * service user's rights except acting on other clients' leases: hand it out like a password.
   * Their data moves over UCX's TCP through a gpuflow-relay child process, never in the
   * service's own. The listener speaks TLS 1.3 with the certificate and key named by the
   * environment variables GPUFLOW_SERVE_TLS_CERT and GPUFLOW_SERVE_TLS_KEY (and
   * GPUFLOW_SERVE_TLS_CLIENT_CA for client certificates, GPUFLOW_SERVE_TRUSTED_DEVICES for where
   * a TLS client's data plane may run); without them the start is refused unless
   * GPUFLOW_SERVE_INSECURE_LISTEN=1 asks for plain TCP (endpoint tcp+insecure://HOST:PORT).
   * See docs/service.md, "TLS". */
  const char *listen;
  const char *token_file;
  /* Appended in 0.7: how long a job whose lease's holder went without releasing it (killed; see
   * gf_lease_bind_process_group) has between the service's SIGTERM and its SIGKILL, in seconds;
   * 0: 10. */
  double job_kill_grace_s;
  /* Appended in 0.8: a unix stream socket already bound and listening (handed over by systemd's
   * socket activation: `gpuflow serve` passes SD_LISTEN_FDS_START) that the service accepts on
   * instead of creating socket_path; 0: none (fds 0-2 are never handed over). The service owns
   * it from then on and closes it at stop, but never removes its file: whoever created it
   * (systemd) owns that. socket_path is then ignored except for display if given; the endpoint
   * is the socket's own path (getsockname). The saved grants live beside that path as usual.
   * Refused with GF_ERR_INVALID_ARGUMENT naming listen_fd when it is not an open unix stream
   * socket that listens. */
  int32_t listen_fd;
} gf_service_config;

#define GF_SERVICE_CONFIG_INIT                         \
  {                                                    \
    sizeof(gf_service_config), /* struct_size */       \
        NULL,                  /* pool */              \
        NULL,                  /* socket_path */       \
        NULL,                  /* group */             \
        0.0,                   /* usage_half_life_s */ \
        0.0,                   /* client_gpu_cap */    \
        0.0,                   /* user_gpu_cap */      \
        NULL,                  /* log */               \
        NULL,                  /* log_user_data */     \
        NULL,                  /* user_weights */      \
        NULL,                  /* dashboard */         \
        NULL,                  /* plugins */           \
        0,                     /* plugin_count */      \
        NULL,                  /* listen */            \
        NULL,                  /* token_file */        \
        0.0,                   /* job_kill_grace_s */  \
        0                      /* listen_fd */         \
  }

/* Starts a service on its own thread; returns once it accepts connections. Ownership of *out
 * goes to the caller: stop it with gf_service_stop. Errors: GF_ERR_STRUCT_SIZE,
 * GF_ERR_INVALID_ARGUMENT (a field, named), GF_ERR_STATE (a service already listens there),
 * GF_ERR_SYSTEM (the socket, naming the path and errno). Thread-safe. */
GF_API gf_status gf_service_start(gf_service **out, const gf_service_config *config);

/* Where a service listens when given no socket path, as an endpoint ("unix:///…"): what
 * `gpuflow serve` uses by default and what the gpuflow command's client commands try when
 * neither --pool nor GPUFLOW_POOL names one (first; when no socket is there, they try the node's
 * system socket, /run/gpuflow/gpuflow.sock: docs/service.md). Static storage, computed once.
 * Thread-safe. */
GF_API const char *gf_default_endpoint(void);

/* The endpoint clients use ("unix:///…"), owned by the service. Thread-safe. */
GF_API const char *gf_service_endpoint(const gf_service *service);

/* Since 0.6: where clients of other hosts connect ("tcp://HOST:PORT", the port actually bound),
 * owned by the service; NULL when it has no listen address (or the handle is bad). Thread-safe. */
GF_API const char *gf_service_remote_endpoint(const gf_service *service);

/* The service's dashboard address ("http://HOST:PORT/"), or NULL when it serves none. Borrowed,
 * valid until gf_service_stop. Thread-safe. */
GF_API const char *gf_service_dashboard_url(const gf_service *service);

/* Since 0.8: replaces the service's policy with the one in `config`: user_weights,
 * client_gpu_cap, user_gpu_cap and usage_half_life_s (0: the default, as at start); every other
 * field is ignored. Leases held and requests queued stay; the next scheduling pass uses the new
 * policy. Checked like gf_service_start checks them (GF_ERR_INVALID_ARGUMENT naming the field;
 * nothing changes then). Returns once the service's loop has applied it; the service logs what
 * changed (through its log callback), e.g. 'policy: user_gpu_cap 0 -> 2; weight of alice 1 -> 3',
 * or 'policy: unchanged'. Thread-safe; not from a log callback. GF_ERR_INVALID_HANDLE for a null
 * or stopped service. */
GF_API gf_status gf_service_update_policy(gf_service *service, const gf_service_config *config);

/* Stops the service: every client is told (Goodbye) and disconnected, every lease and queued
 * request ends, the socket file is removed (not one handed over as listen_fd), the thread is
 * joined and the service freed. NULL is ignored. Not to be called from a log callback. */
GF_API void gf_service_stop(gf_service *service);

/* A request for a lease.
 * - gpus: 0 for none; a fraction in (0, 1) for a share of one device; a whole number N for N
 *   whole devices. Anything else is GF_ERR_INVALID_ARGUMENT.
 * - gpu_memory: bytes on each device granted; 0: the share's part of the device's memory (all
 *   of it for whole devices).
 * - cpus: CPUs of the node (counted, not pinned).
 * - devices / device_count: only these device ordinals, each at most once, at most
 *   GF_MAX_LEASE_DEVICES of them; NULL: any.
 * - priority: orders this client's own requests (higher first); fair share orders clients.
 * - name: shown by `gpuflow status`, UTF-8 of at most GF_MAX_LEASE_NAME_BYTES; NULL: none. */
typedef struct gf_lease_request {
  uint32_t struct_size;
  double gpus;
  uint64_t gpu_memory;
  double cpus;
  const int32_t *devices;
  uint32_t device_count;
  int32_t priority;
  const char *name;
} gf_lease_request;

#define GF_LEASE_REQUEST_INIT                    \
  {                                              \
    sizeof(gf_lease_request), /* struct_size */  \
        0.0,                  /* gpus */         \
        0,                    /* gpu_memory */   \
        0.0,                  /* cpus */         \
        NULL,                 /* devices */      \
        0,                    /* device_count */ \
        0,                    /* priority */     \
        NULL                  /* name */         \
  }

/* Waits for a lease from the pool's service. timeout_ms < 0 waits as long as it takes; 0 asks
 * once. Returns ownership of *out (release with gf_lease_release); *out is NULL on failure.
 * Errors: GF_ERR_STATE (the pool is embedded: leases come from a service), GF_ERR_INFEASIBLE
 * (never grantable on this node: more than it has, or above a cap; the message says which),
 * GF_TIMEOUT, GF_ERR_INVALID_ARGUMENT (a field of the request, named, or past a bound above: then
 * nothing was sent, and the pool's connection and leases are as they were), GF_ERR_SYSTEM (the
 * service went away; the message names the endpoint). Thread-safe; blocks only the calling
 * thread. */
GF_API gf_status gf_lease_acquire(gf_lease **out, gf_pool *pool, const gf_lease_request *request,
                                  int64_t timeout_ms);

/* One device of a lease. */
typedef struct gf_lease_device {
  uint32_t struct_size;
  int32_t ordinal;        /* the service's device ordinal (PCI bus order) */
  const char *uuid;       /* "GPU-…"; stable fake ones for emulated devices; owned by the lease */
  const char *pci_bus_id; /* "" when emulated; owned by the lease */
  double share;           /* of the device: 1 for a whole one */
  uint64_t memory;        /* bytes of it */
} gf_lease_device;

#define GF_LEASE_DEVICE_INIT                   \
  {                                            \
    sizeof(gf_lease_device), /* struct_size */ \
        0,                   /* ordinal */     \
        NULL,                /* uuid */        \
        NULL,                /* pci_bus_id */  \
        0.0,                 /* share */       \
        0                    /* memory */      \
  }

/* The lease's id (as `gpuflow status` shows it), device count and CPUs. Thread-safe. */
GF_API gf_status gf_lease_info(uint64_t *id, uint32_t *device_count, double *cpus,
                               const gf_lease *lease);

/* Describes device `index` (0 <= index < device_count) of the lease. Thread-safe. */
GF_API gf_status gf_lease_device_info(gf_lease_device *out, const gf_lease *lease, uint32_t index);

/* Since 0.10: what a process running on the lease needs in its environment, as "NAME=value"
 * lines, each ended by '\n', in this order:
 *   CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES  the devices by UUID ("void" for the second
 *                                                 when the lease has none), so that CUDA and
 *                                                 container runtimes show the job those alone;
 *   GPUFLOW_DEVICES, GPUFLOW_LEASE_ID             the ordinals as the service numbers them, and
 *                                                 the lease's id;
 *   GPUFLOW_EMULATED_DEVICES,                     emulated devices only: a pool the job starts
 *   GPUFLOW_EMULATED_DEVICE_MEMORY                emulates the node up to the highest leased
 *                                                 device, at the leased memory, so that the
 *                                                 UUIDs above name exactly the leased ones;
 *   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,            a share of one device only: the limits NVIDIA
 *   CUDA_MPS_PINNED_DEVICE_MEM_LIMIT              MPS enforces where it runs.
 * `gpuflow lease` runs its command with exactly these, and Python's LocalGPUCluster its workers.
 * *out is owned by the lease and valid until it is released. Thread-safe. */
GF_API gf_status gf_lease_environment(const char **out, const gf_lease *lease);

/* 1 in *out once the service has asked for the lease back (fair share or shutdown), or the
 * connection to it is gone for good; the holder should finish what runs on it and release it.
 * While its pool reconnects (see "Shared pools"), 0: a restarted service keeps the lease for this
 * process, and the lease is taken back on the new connection (by this call, once there is one);
 * 1 if the restarted service did not keep it. */
GF_API gf_status gf_lease_revoked(int32_t *out, const gf_lease *lease);

/* Since 0.7: the processes of `process_group` (a process group of this host and of the caller's
 * user; see setpgid(2)) run on the lease's devices. The lease then owns that job: should this
 * process end without releasing the lease (killed, crashed), the service keeps the devices from
 * everyone else until no process of the group is left, and ends the group itself (SIGTERM at
 * once, SIGKILL 10 s later); a service restarted meanwhile still knows (docs/service.md, "A
 * lease owns its job"). `gpuflow lease` binds its command's group this way. Binding again
 * replaces the group. Errors: GF_ERR_INVALID_ARGUMENT (no such group, or another user's),
 * GF_ERR_STATE (a service on another host, or one older than 0.7), GF_ERR_SYSTEM (the service
 * is gone). Externally synchronized with gf_lease_release. */
GF_API gf_status gf_lease_bind_process_group(gf_lease *lease, int64_t process_group);

/* Hands the lease back and frees it. NULL is ignored. Returns GF_OK, or GF_ERR_SYSTEM when the
 * service is gone (the lease ended with the connection anyway). While its pool reconnects, GF_OK:
 * the lease is handed back once a service answers again. Externally synchronized. It
 * waits for no answer from the service: the pool's next request is read after the release, so it
 * finds the devices free; another client gets them once the service has read it. */
GF_API gf_status gf_lease_release(gf_lease *lease);

typedef enum gf_status_format {
  GF_STATUS_TEXT = 1, /* the table `gpuflow status` prints */
  GF_STATUS_JSON = 2, /* one JSON object: service, devices, leases, queued, clients */
  GF_STATUS_FORMAT_FORCE32 = 0x7FFFFFFF
} gf_status_format;

/* The service's view of the node: devices, every lease and its holder (pid, user, name, since),
 * queued requests with their position, and per-client usage. For a connected pool only
 * (GF_ERR_STATE otherwise). out->data is owned by the caller (gf_bytes_free). Thread-safe. */
GF_API gf_status gf_pool_service_status(gf_bytes *out, gf_pool *pool, gf_status_format format);

/* (0.4) The check `gpuflow doctor` runs on the data plane (UCX): one JSON object in out (owned by
 * the caller: gf_bytes_free):
 *   "ucx_version", "cuda_aware" (whether this UCX build can move CUDA memory), "offered" (every
 *   transport and device UCX finds on this machine: component, transport, device, kind),
 *   "problems" (components UCX could not open, with its reason);
 * and, when pool is a connected pool (NULL: the machine's inventory only), "data_plane":
 *   "transports" (what UCX picked between this process and the service, e.g.
 *   "posix/memory,cma/memory") and "results": for blobs of 8 B, 64 KiB, 1 MiB and 16 MiB, the
 *   median seconds of a put and of a get to the service ("put_s", "get_s"), bytes per second,
 *   and "repeats". Every blob's content is compared on its way back. The transfers take about
 *   `seconds` in all (each size runs at least once; 0 to 3600).
 * Errors: GF_ERR_STATE for an embedded pool or when the service offers this process no data
 * plane (another user, an older service), GF_ERR_SYSTEM when a transfer fails (naming the
 * service), GF_ERR_INTERNAL when bytes come back different. Thread-safe. */
GF_API gf_status gf_data_plane_check(gf_bytes *out, gf_pool *pool, double seconds);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUFLOW_H */
