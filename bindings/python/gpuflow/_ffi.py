"""ctypes declarations of the C ABI in include/gpuflow.h, and loading of the shared library.

The library is found, in this order:
1. the environment variable GPUFLOW_LIBRARY (a path to libgpuflow.so, or to the directory
   holding it);
2. a libgpuflow.so* next to this package (an installed wheel may ship it there);
3. the build directories of a source checkout (build*/src/ at the repository root);
4. the libdir of an installed gpuflow.pc (`pkg-config --variable=libdir gpuflow`: set
   PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix pkg-config does not search by default);
5. the system's library search path (ctypes.util.find_library, then a plain dlopen of
   libgpuflow.so.0, which follows LD_LIBRARY_PATH and the ld.so cache).
The ImportError raised when none loads lists every place tried and why it gave nothing.

Only this module touches ctypes declarations; everything else goes through ``lib``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import subprocess
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_int32, c_int64,
                    c_uint32, c_uint64, c_void_p)

# gf_status values (include/gpuflow.h)
GF_OK = 0
GF_TIMEOUT = 1
GF_ERR_INVALID_ARGUMENT = -1
GF_ERR_INVALID_HANDLE = -2
GF_ERR_STRUCT_SIZE = -3
GF_ERR_VERSION_MISMATCH = -4
GF_ERR_INVALID_GRAPH = -5
GF_ERR_INFEASIBLE = -6
GF_ERR_OUT_OF_MEMORY = -7
GF_ERR_TASK_FAILED = -8
GF_ERR_CANCELLED = -9
GF_ERR_STATE = -10
GF_ERR_NOT_FOUND = -11
GF_ERR_SHUT_DOWN = -12
GF_ERR_SYSTEM = -13
GF_ERR_INTERNAL = -14

GF_BACKEND_AUTO, GF_BACKEND_HOST, GF_BACKEND_CUDA = 0, 1, 2
GF_WORKER_CPU, GF_WORKER_GPU = 1, 2
GF_DATA_KEEP = 1
GF_HOST_BUFFER_BORROW = 1

GF_RUN_RUNNING, GF_RUN_SUCCEEDED, GF_RUN_FAILED, GF_RUN_CANCELLED = 1, 2, 3, 4
GF_TASK_WAITING, GF_TASK_QUEUED, GF_TASK_RUNNING = 1, 2, 3
GF_TASK_SUCCEEDED, GF_TASK_FAILED, GF_TASK_CANCELLED = 4, 5, 6

# The header's major version: a library of another major version refuses to create a pool.
GF_VERSION_MAJOR = 0


class gf_resource(Structure):
    _fields_ = [("name", c_char_p), ("amount", c_double)]


class gf_pool_config(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("backend", c_int),
        ("cpu_workers", c_int32),
        ("emulated_devices", c_int32),
        ("emulated_device_memory", c_uint64),
        ("emulated_bandwidth", c_double),
        ("gpu_worker_threads", c_uint32),
        ("cpu_worker_labels", POINTER(gf_resource)),
        ("cpu_worker_label_count", c_uint32),
        ("gpu_worker_labels", POINTER(gf_resource)),
        ("gpu_worker_label_count", c_uint32),
    ]


class gf_pool_config_v2(Structure):
    """gf_pool_config with the fields appended after 0.1.0's first layout (device selection,
    memory limit, spilling); used only when the loaded library knows them."""
    _fields_ = gf_pool_config._fields_ + [
        ("devices", POINTER(c_int32)),
        ("device_count", c_uint32),
        ("device_memory_limit", c_uint64),
        ("spill_threshold", c_double),
    ]


class gf_pool_config_v3(Structure):
    """gf_pool_config with `endpoint` (0.2): the node's shared pool to connect to."""
    _fields_ = gf_pool_config_v2._fields_ + [("endpoint", c_char_p)]


class gf_pool_config_v4(Structure):
    """gf_pool_config with `dashboard` (0.3): "HOST:PORT" for the live page and /metrics."""
    _fields_ = gf_pool_config_v3._fields_ + [("dashboard", c_char_p)]


class gf_pool_config_v5(Structure):
    """gf_pool_config with `token_file` (0.6): the token of a tcp:// service on another host."""
    _fields_ = gf_pool_config_v4._fields_ + [("token_file", c_char_p)]


LOG_FN = CFUNCTYPE(None, c_char_p, c_void_p)  # gf_log_fn


class gf_service_config(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("pool", c_void_p),
        ("socket_path", c_char_p),
        ("group", c_char_p),
        ("usage_half_life_s", c_double),
        ("client_gpu_cap", c_double),
        ("user_gpu_cap", c_double),
        ("log", c_void_p),
        ("log_user_data", c_void_p),
        ("user_weights", c_char_p),
    ]


class gf_service_config_v2(Structure):
    """gf_service_config with `dashboard` (0.3)."""
    _fields_ = gf_service_config._fields_ + [("dashboard", c_char_p)]


class gf_service_config_v3(Structure):
    """gf_service_config with `plugins` (0.5) and `listen` / `token_file` (0.6)."""
    _fields_ = gf_service_config_v2._fields_ + [
        ("plugins", POINTER(c_char_p)),
        ("plugin_count", c_uint32),
        ("listen", c_char_p),
        ("token_file", c_char_p),
    ]


class gf_service_config_v5(Structure):
    """gf_service_config with `job_kill_grace_s` (0.7) and `listen_fd` (0.8)."""
    _fields_ = gf_service_config_v3._fields_ + [
        ("job_kill_grace_s", c_double),
        ("listen_fd", c_int32),
    ]


class gf_lease_request(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("gpus", c_double),
        ("gpu_memory", c_uint64),
        ("cpus", c_double),
        ("devices", POINTER(c_int32)),
        ("device_count", c_uint32),
        ("priority", c_int32),
        ("name", c_char_p),
    ]


class gf_lease_device(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("ordinal", c_int32),
        ("uuid", c_char_p),
        ("pci_bus_id", c_char_p),
        ("share", c_double),
        ("memory", c_uint64),
    ]


class gf_bytes(Structure):
    _fields_ = [("data", c_void_p), ("size", c_uint64)]


class gf_worker_info(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", c_int),
        ("device", c_int32),
        ("threads", c_uint32),
        ("emulated", c_uint32),
        ("name", c_char_p),
    ]


class gf_ledger_entry(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("resource", c_char_p),
        ("capacity", c_double),
        ("in_use", c_double),
        ("peak_in_use", c_double),
    ]


# Task bodies, destructors and completion callbacks. Bodies are called from worker threads:
# ctypes takes the GIL around the Python code of a CFUNCTYPE callback.
TASK_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
DESTROY_FN = CFUNCTYPE(None, c_void_p)
RUN_CALLBACK = CFUNCTYPE(None, c_void_p, c_int, c_void_p)


# gf_value_ops: how a device value moves to host memory and back (0.2).
SPILL_FN = CFUNCTYPE(c_void_p, c_void_p, c_void_p)
UNSPILL_FN = CFUNCTYPE(c_void_p, c_void_p, c_int32, c_void_p)


class gf_value_ops(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("spill", c_void_p),
        ("unspill", c_void_p),
        ("user_data", c_void_p),
    ]


class gf_device_memory(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("capacity", c_uint64),
        ("resident", c_uint64),
        ("reserved", c_uint64),
        ("spilled", c_uint64),
        ("spilled_total", c_uint64),
        ("unspilled_total", c_uint64),
    ]


class gf_task_desc(Structure):
    # Pointer fields are declared c_void_p so that addresses (ints) can be stored directly:
    # graph construction is a hot path and avoids building ctypes arrays per task.
    _fields_ = [
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("cpu_fn", c_void_p),
        ("gpu_fn", c_void_p),
        ("user_data", c_void_p),
        ("user_data_destroy", c_void_p),
        ("resources", c_void_p),
        ("resource_count", c_uint32),
        ("priority", c_int32),
        ("retries", c_uint32),
        ("inputs", c_void_p),
        ("input_count", c_uint32),
        ("outputs", c_void_p),
        ("output_count", c_uint32),
        ("after", c_void_p),
        ("after_count", c_uint32),
    ]


class gf_task_desc_v2(Structure):
    """gf_task_desc with the fields appended since: kernel, command (0.1, graphs as files) and
    cost_key (what the task's duration estimate is learnt under)."""
    _fields_ = gf_task_desc._fields_ + [
        ("kernel", c_char_p),
        ("command", c_void_p),
        ("cost_key", c_char_p),
    ]


class gf_submit_options(Structure):
    _fields_ = [("struct_size", c_uint32), ("on_complete", c_void_p), ("user_data", c_void_p)]


class gf_run_stats(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("tasks", c_uint64),
        ("succeeded", c_uint64),
        ("failed", c_uint64),
        ("cancelled", c_uint64),
        ("attempts", c_uint64),
        ("transfers", c_uint64),
        ("bytes_transferred", c_uint64),
        ("elapsed_s", c_double),
    ]


class gf_task_env(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", c_int),
        ("device", c_int32),
        ("worker", c_uint32),
        ("attempt", c_uint32),
        ("stream", c_void_p),
        ("task_name", c_char_p),
    ]


def _pkg_config_libdir(tried):
    """The libdir of an installed gpuflow.pc (PKG_CONFIG_PATH, or pkg-config's default paths)."""
    where = "pkg-config --variable=libdir gpuflow"
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "gpuflow"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        tried.append(f"{where}: cannot run pkg-config ({e})")
        return None
    libdir = out.stdout.strip()
    if out.returncode != 0 or not libdir:
        pc_path = os.environ.get("PKG_CONFIG_PATH")
        tried.append(f"{where}: no gpuflow.pc found (PKG_CONFIG_PATH="
                     f"{pc_path if pc_path is not None else 'unset'})")
        return None
    return libdir


def _in_dir(directory, where, tried):
    """libgpuflow.so* in `directory`, the versioned names first; notes in `tried` if none."""
    # The soname first (what a program linked against gpuflow loads), then the dev symlink.
    found = sorted(glob.glob(os.path.join(os.path.normpath(directory), "libgpuflow.so*")),
                   key=lambda p: (not p.endswith(".so.0"), not p.endswith(".so"), p))
    if not found:
        tried.append(f"{where} ({directory}): no libgpuflow.so*")
    return [(where, path) for path in found]


def _candidates(tried):
    """Yields (where, path) pairs to dlopen, in order; each place that gives nothing to try is
    noted in `tried` (a list of strings) so the ImportError can say where it looked."""
    env = os.environ.get("GPUFLOW_LIBRARY")
    if env:
        where = "GPUFLOW_LIBRARY"
        if os.path.isdir(env):
            found = sorted(glob.glob(os.path.join(env, "libgpuflow.so*")))
            found += sorted(glob.glob(os.path.join(env, "src", "libgpuflow.so*")))
            if not found:
                tried.append(f"{where}={env}: no libgpuflow.so* in it or in its src/")
            for path in found:
                yield where, path
        else:
            yield where, env
        return  # an explicit choice: never fall back to another library silently
    tried.append("GPUFLOW_LIBRARY: not set")
    here = os.path.dirname(os.path.abspath(__file__))
    yield from _in_dir(here, "next to the package", tried)
    root = os.path.abspath(os.path.join(here, "..", "..", ".."))
    if os.path.exists(os.path.join(root, "include", "gpuflow.h")):  # a source checkout
        for build in ("build", "build-rel", "build-py"):
            path = os.path.join(root, build, "src", "libgpuflow.so")
            if os.path.exists(path):
                yield "the source checkout's build directory", path
    libdir = _pkg_config_libdir(tried)
    if libdir:
        yield from _in_dir(libdir, "pkg-config's libdir for gpuflow", tried)
    found = ctypes.util.find_library("gpuflow")
    if found:
        yield "ctypes.util.find_library('gpuflow')", found
    else:
        tried.append("ctypes.util.find_library('gpuflow'): nothing found")
    # The dynamic loader's own search path: LD_LIBRARY_PATH, the ld.so cache, default directories.
    yield "the loader's search path", "libgpuflow.so.0"


def _load():
    tried = []
    for where, path in _candidates(tried):
        try:
            return ctypes.CDLL(path), path  # CDLL (not PyDLL): every call releases the GIL
        except OSError as e:
            tried.append(f"{where}: {path}: {e}")
    raise ImportError(
        "gpuflow: cannot load libgpuflow.so. Install gpuflow (cmake --install BUILD --prefix "
        "PREFIX) and set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig, or set GPUFLOW_LIBRARY to the "
        "library (BUILD/src/libgpuflow.so). Tried:\n  " + "\n  ".join(tried))


lib, library_path = _load()

_S = c_int  # gf_status


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


gf_version = _fn("gf_version", c_uint32)
gf_version_string = _fn("gf_version_string", c_char_p)
gf_last_error = _fn("gf_last_error", c_char_p)
gf_status_name = _fn("gf_status_name", c_char_p, c_int)

gf_pool_config_init = _fn("gf_pool_config_init", None, c_void_p, c_uint32)
GF_STATUS_TEXT = 1
GF_STATUS_JSON = 2
# Shared pools (0.2); None with an older library.
gf_lease_acquire = _fn("gf_lease_acquire", _S, c_void_p, c_void_p, c_void_p, c_int64) \
    if hasattr(lib, "gf_lease_acquire") else None
if gf_lease_acquire is not None:
    gf_lease_info = _fn("gf_lease_info", _S, c_void_p, c_void_p, c_void_p, c_void_p)
    gf_lease_device_info = _fn("gf_lease_device_info", _S, c_void_p, c_void_p, c_uint32)
    gf_lease_revoked = _fn("gf_lease_revoked", _S, c_void_p, c_void_p)
    gf_lease_release = _fn("gf_lease_release", _S, c_void_p)
    gf_lease_bind_process_group = _fn("gf_lease_bind_process_group", _S, c_void_p, c_int64)
    gf_pool_service_status = _fn("gf_pool_service_status", _S, c_void_p, c_void_p, c_int)
    gf_bytes_free = _fn("gf_bytes_free", None, c_void_p)
    gf_default_endpoint = _fn("gf_default_endpoint", c_char_p)
    gf_service_start = _fn("gf_service_start", _S, c_void_p, c_void_p)
    gf_service_endpoint = _fn("gf_service_endpoint", c_char_p, c_void_p)
    gf_service_stop = _fn("gf_service_stop", None, c_void_p)
# Dashboards (0.3); None with an older library.
gf_pool_dashboard_url = _fn("gf_pool_dashboard_url", _S, c_void_p, c_void_p) \
    if hasattr(lib, "gf_pool_dashboard_url") else None
gf_service_dashboard_url = _fn("gf_service_dashboard_url", c_char_p, c_void_p) \
    if hasattr(lib, "gf_service_dashboard_url") else None
# Remote clients (0.6); None with an older library.
gf_service_remote_endpoint = _fn("gf_service_remote_endpoint", c_char_p, c_void_p) \
    if hasattr(lib, "gf_service_remote_endpoint") else None
# Policy updates and handed-over sockets (0.8); None with an older library.
gf_service_update_policy = _fn("gf_service_update_policy", _S, c_void_p, c_void_p) \
    if hasattr(lib, "gf_service_update_policy") else None
gf_pool_create_versioned = _fn("gf_pool_create_versioned", _S, c_void_p, c_void_p, c_uint32)
gf_pool_destroy = _fn("gf_pool_destroy", None, c_void_p)
gf_pool_worker_count = _fn("gf_pool_worker_count", _S, c_void_p, c_void_p)
gf_pool_worker_info = _fn("gf_pool_worker_info", _S, c_void_p, c_void_p, c_uint32)
gf_pool_ledger_size = _fn("gf_pool_ledger_size", _S, c_void_p, c_void_p, c_uint32)
gf_pool_ledger_entry = _fn("gf_pool_ledger_entry", _S, c_void_p, c_void_p, c_uint32, c_uint32)
gf_pool_device_count = _fn("gf_pool_device_count", _S, c_void_p, c_void_p)
# A lease's environment (0.10); None with an older library.
gf_lease_environment = _fn("gf_lease_environment", _S, c_void_p, c_void_p) \
    if hasattr(lib, "gf_lease_environment") else None
gf_pool_devices_source = _fn("gf_pool_devices_source", _S, c_void_p, c_void_p) \
    if hasattr(lib, "gf_pool_devices_source") else None
gf_pool_device_memory = _fn("gf_pool_device_memory", _S, c_void_p, c_void_p, c_uint32) \
    if hasattr(lib, "gf_pool_device_memory") else None
gf_pool_ledger_lookup = _fn("gf_pool_ledger_lookup", _S, c_void_p, c_void_p, c_uint32, c_char_p)

gf_graph_create = _fn("gf_graph_create", _S, c_void_p)
gf_graph_destroy = _fn("gf_graph_destroy", None, c_void_p)
gf_graph_add_value = _fn("gf_graph_add_value", _S, c_void_p, c_void_p, c_char_p, c_uint64,
                         c_uint32)
gf_graph_add_host_value = _fn("gf_graph_add_host_value", _S, c_void_p, c_void_p, c_char_p,
                              c_void_p, c_void_p, c_uint64)
gf_graph_add_host_buffer = _fn("gf_graph_add_host_buffer", _S, c_void_p, c_void_p, c_char_p,
                               c_void_p, c_uint64, c_uint32)
gf_task_desc_init = _fn("gf_task_desc_init", None, c_void_p, c_uint32)
gf_graph_add_task = _fn("gf_graph_add_task", _S, c_void_p, c_void_p, c_void_p)
gf_graph_add_dependency = _fn("gf_graph_add_dependency", _S, c_void_p, c_uint64, c_uint64)
gf_graph_task_count = _fn("gf_graph_task_count", _S, c_void_p, c_void_p)

gf_graph_serialize = _fn("gf_graph_serialize", _S, c_void_p, c_void_p, c_int)
gf_graph_deserialize = _fn("gf_graph_deserialize", _S, c_void_p, c_void_p, c_uint64, c_int,
                           c_uint32)
gf_graph_data_count = _fn("gf_graph_data_count", _S, c_void_p, c_void_p)
gf_graph_data_at = _fn("gf_graph_data_at", _S, c_void_p, c_void_p, c_uint64)
gf_pool_load_plugin = _fn("gf_pool_load_plugin", _S, c_void_p, c_char_p)
GF_GRAPH_FORMAT_AUTO = 0
GF_GRAPH_FORMAT_JSON = 2

gf_graph_submit = _fn("gf_graph_submit", _S, c_void_p, c_void_p, c_void_p, c_void_p)
gf_run_wait = _fn("gf_run_wait", _S, c_void_p, c_int64)
gf_run_poll = _fn("gf_run_poll", _S, c_void_p)
gf_run_state_get = _fn("gf_run_state_get", _S, c_void_p, c_void_p)
gf_run_fd = _fn("gf_run_fd", _S, c_void_p, c_void_p)
gf_run_cancel = _fn("gf_run_cancel", _S, c_void_p)
gf_run_destroy = _fn("gf_run_destroy", None, c_void_p)
gf_run_fetch = _fn("gf_run_fetch", _S, c_void_p, c_void_p, c_uint64, c_void_p, c_uint64)
gf_run_task_state = _fn("gf_run_task_state", _S, c_void_p, c_void_p, c_uint64)
gf_run_task_error = _fn("gf_run_task_error", _S, c_void_p, c_void_p, c_uint64)
gf_run_task_attempts = _fn("gf_run_task_attempts", _S, c_void_p, c_void_p, c_uint64)
gf_run_task_worker = _fn("gf_run_task_worker", _S, c_void_p, c_void_p, c_uint64)
gf_run_value = _fn("gf_run_value", _S, c_void_p, c_void_p, c_uint64)
gf_run_stats_get = _fn("gf_run_stats_get", _S, c_void_p, c_void_p)

gf_task_ctx_input = _fn("gf_task_ctx_input", _S, c_void_p, c_void_p, c_void_p, c_uint32)
gf_task_ctx_set_value = _fn("gf_task_ctx_set_value", _S, c_void_p, c_uint32, c_void_p, c_void_p,
                            c_uint64)
# Device values (0.2); None with an older library (values are then never charged).
gf_task_ctx_set_device_value = _fn("gf_task_ctx_set_device_value", _S, c_void_p, c_uint32,
                                   c_void_p, c_void_p, c_uint64, c_void_p) \
    if hasattr(lib, "gf_task_ctx_set_device_value") else None
gf_task_ctx_fail = _fn("gf_task_ctx_fail", _S, c_void_p, c_char_p)
gf_task_ctx_cancelled = _fn("gf_task_ctx_cancelled", c_int, c_void_p)
gf_task_ctx_env = _fn("gf_task_ctx_env", _S, c_void_p, c_void_p)


def library_struct_size(init_fn) -> int:
    """The struct_size the loaded library's gf_*_init writes given room for any layout: its own
    sizeof. Bindings initialise their own ctypes structs (zeroed, struct_size = their sizeof),
    exactly as the _INIT macros do."""
    buf = ctypes.create_string_buffer(4096)
    init_fn(buf, 4096)  # writes at most 4096 bytes: the library's whole struct
    return c_uint32.from_buffer(buf).value


def task_desc_layout():
    """The newest gf_task_desc layout the loaded library understands: gf_task_desc_v2 (with
    cost_key) or the original gf_task_desc."""
    if library_struct_size(gf_task_desc_init) >= ctypes.sizeof(gf_task_desc_v2):
        return gf_task_desc_v2
    return gf_task_desc


def last_error() -> str:
    return (gf_last_error() or b"").decode("utf-8", "replace")


def status_name(status: int) -> str:
    return (gf_status_name(status) or b"").decode()
