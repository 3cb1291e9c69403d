"""A Dask scheduler that runs any Dask graph on a gpuflow pool.

    import dask, gpuflow.dask
    dask.compute(x, scheduler=gpuflow.dask.get)            # the lazily created default pool
    dask.compute(x, scheduler=gpuflow.dask.get, pool=p)     # a pool of yours
    with dask.config.set(scheduler=gpuflow.dask.get, **{"gpuflow.pool": p}): x.compute()

Each Dask key becomes one gpuflow task whose body computes it (``dask._task_spec`` node called
with the values of its dependencies); a key's value is an opaque gpuflow value, freed as soon
as its last consumer ran. ``dask.annotate(resources=..., priority=..., retries=...)`` becomes
the task's resource request, priority and retries: ``{"GPU": 1}`` places the task on a GPU
worker (on the host backend: an emulated device thread), user labels such as ``{"bigmem": 1}``
on workers that advertise them.

Annotations survive optimization: Dask's low-level fusion turns a HighLevelGraph into a plain
dict and drops every annotation (dask#7036). When the graph carries annotations, this scheduler
materializes it with ``optimization.fuse.active=False`` and ``optimization.annotations.fuse=False``
(blockwise fusion still merges layers whose annotations are equal; layers with different
annotations stay separate tasks). Graphs without annotations are materialized as Dask would.

``import gpuflow.dask`` registers the scheduler under the name "gpuflow" (in
``dask.base.named_schedulers``), so ``dask.config.set(scheduler="gpuflow")`` and
``x.compute(scheduler="gpuflow")`` work too.

Each gpuflow task is named after its Dask key (``str(key)``: "inc-abc", "('x', 0, 1)"), so
gpuflow's messages (an infeasible request, a failed input) name the key. A resource annotation
whose name differs from one of the pool's resources only by case ("gpu" for "GPU") is rejected at
submit with an InfeasibleError in which the library says which name was meant.

Dask's local-scheduler callbacks (dask.diagnostics ProgressBar, Profiler, ResourceProfiler,
CacheProfiler, and any dask.callbacks.Callback) are called as Dask's own local schedulers call
them: start, start_state, pretask, posttask (with the result, Dask's state dict and the name of
the gpuflow worker that ran the task, e.g. "cpu:0") and finish, all on the thread that called
compute(): task bodies report to it through a queue. Aliases are reported when their target
finished (with their target's worker). Without active callbacks nothing of this costs anything.

gpuflow's own progress bar (gpuflow._progress) is shown on stderr when interactive (a terminal
or a notebook) and the computation lasts over a second, unless a Dask callback is active (a
ProgressBar draws its own); ``progress=True/False`` (a keyword of compute()), dask.config
"gpuflow.progress" or GPUFLOW_PROGRESS=0/1 decide otherwise.

Ctrl-C while waiting cancels the run and raises KeyboardInterrupt at once; bodies still running
are not waited for, and their results are dropped (see gpuflow._run on what happens at exit).

A compute() called from inside a task body (nested compute) runs that inner graph with Dask's
synchronous scheduler on the calling worker thread: waiting for other tasks of the same pool from
a worker could deadlock it, and gpuflow has no way for a body to give up its worker meanwhile.

Dask distributed (imported on first use, so the scheduler above needs only dask):
``LocalGPUCluster`` (a LocalCluster with one worker per GPU of the node, each on devices leased
from the node's gpuflow service), ``GPUNanny`` (the nanny that leases them), and the worker
command for other nodes, ``python -m gpuflow.dask worker SCHEDULER_ADDRESS``
(``gpuflow-dask-worker``); see gpuflow._dask_cluster.
"""
from __future__ import annotations

import ctypes
import queue
import threading
from array import array
from collections.abc import Mapping

import dask
from dask._task_spec import Alias, DataNode, Task, convert_legacy_graph
from dask.highlevelgraph import HighLevelGraph
from dask.utils import key_split

from . import _ffi as F
from ._bodies import (BODY_ADDR, GPU_BODY_ADDR, HAS_COST_KEY, TASK_DESC, TaskContext,
                      cost_key_text, current_ctx, failure_exception, input_value)
from ._errors import status_error
from ._graph import Graph, bodies_for, resource_array, table_of
from ._pool import Pool
from ._progress import as_setting
from ._run import WAIT_SLICE_MS, interrupted, run_watcher, wait_run
from ._values import DESTROY_VALUE_ADDR, VALUES, put_value

# LocalGPUCluster and GPUNanny come from __getattr__ below, on first use (they import distributed).
__all__ = ["get", "default_pool", "set_default_pool", "annotations_of", "register",  # noqa: F822
           "keep_annotations",
           "LocalGPUCluster", "GPUNanny"]
_DISTRIBUTED = ("LocalGPUCluster", "GPUNanny", "lease_environment", "service_endpoint")


def __getattr__(name):
    if name in _DISTRIBUTED:
        from . import _dask_cluster
        return getattr(_dask_cluster, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_EMPTY: dict = {}
_default_pool: Pool | None = None
_default_lock = threading.Lock()


def default_pool() -> Pool:
    """The process-wide pool used when no pool is given: created on first use with gpuflow's
    defaults (GPUFLOW_CPU_WORKERS, GPUFLOW_EMULATED_DEVICES, ... override them), closed at exit.
    """
    global _default_pool
    pool = _default_pool
    if pool is not None and not pool.closed:
        return pool
    with _default_lock:
        if _default_pool is None or _default_pool.closed:
            _default_pool = Pool()
        return _default_pool


def set_default_pool(pool: Pool | None) -> None:
    """Makes `pool` the pool used when none is given (None: back to the lazily created one)."""
    global _default_pool
    with _default_lock:
        _default_pool = pool


# ------------------------------------------------------------------------------------------
# Materializing the graph and its annotations
# ------------------------------------------------------------------------------------------

_KEEP_ANNOTATIONS = {"optimization.fuse.active": False, "optimization.annotations.fuse": False}


def keep_annotations():
    """Keeps ``dask.annotate(...)`` through Dask's optimisation in every computation of this
    process, on any scheduler (a distributed Client included, which optimises on the client):
    sets the two options above. Returns Dask's config setter: use it as a context manager to
    restore the previous settings on exit, or call it once to keep them. LocalGPUCluster does
    this for its lifetime; a client of a remote cluster calls it itself."""
    return dask.config.set(_KEEP_ANNOTATIONS)


def _hlg_annotated(hlg: HighLevelGraph) -> bool:
    return any(getattr(layer, "annotations", None) for layer in hlg.layers.values())


def _expr_annotated(expr) -> bool:
    """Whether any HighLevelGraph inside a Dask expression has annotated layers."""
    from dask._expr import Expr

    stack, seen = [expr], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, HighLevelGraph):
            if _hlg_annotated(e):
                return True
            continue
        if isinstance(e, (list, tuple)):
            stack.extend(e)
            continue
        if isinstance(e, Expr):
            stack.extend(e.operands)
    return False


def _hlg_annotations(hlg: HighLevelGraph) -> dict:
    out: dict = {}
    for layer in hlg.layers.values():
        annots = getattr(layer, "annotations", None)
        if not annots:
            continue
        for kind, value in annots.items():
            per_key = out.setdefault(kind, {})
            for k in layer.get_output_keys():
                per_key[k] = value(k) if callable(value) else value
    return out


def annotations_of(dsk) -> tuple[Mapping, dict]:
    """(graph as a mapping, {annotation: {key: value}}) for what a Dask scheduler receives: an
    expression (dask.compute), a HighLevelGraph or a plain dict. Keeps annotations through
    optimization (see the module documentation)."""
    if isinstance(dsk, HighLevelGraph):
        return dict(dsk), _hlg_annotations(dsk)
    if isinstance(dsk, Mapping):
        return dsk, {}
    if not hasattr(dsk, "__dask_graph__"):
        raise TypeError(f"gpuflow.dask.get: expected a Dask graph or expression, not {dsk!r}")
    if _expr_annotated(dsk):
        with dask.config.set(_KEEP_ANNOTATIONS):
            annotations = dsk.__dask_annotations__()
            graph = dsk.__dask_graph__()
    else:
        graph = dsk.__dask_graph__()
        annotations = {}
    if isinstance(graph, HighLevelGraph):
        more = _hlg_annotations(graph)
        for kind, per_key in more.items():
            annotations.setdefault(kind, {}).update(per_key)
        graph = dict(graph)
    return graph, annotations


# ------------------------------------------------------------------------------------------
# The task body
# ------------------------------------------------------------------------------------------

def _compute(ctx, spec):
    """What the body of a Dask key computes: its node called with the values of its
    dependencies (the task's inputs, in order)."""
    node, deps = spec
    if deps:
        values = {}
        i = 0
        for k in deps:
            values[k] = input_value(ctx, i)
            i += 1
    else:
        values = _EMPTY
    return node(values)


_PRE, _POST = 0, 1


def _compute_reporting(ctx, spec):
    """_compute for a run with Dask callbacks: reports the start and the result of the key to
    the thread that called get() (which calls the callbacks), through `events`."""
    node, deps, key, events = spec
    events.put((_PRE, key, None, None))
    result = _compute(ctx, (node, deps))
    events.put((_POST, key, result, TaskContext(ctx).env().worker))
    return result


_cost_keys: dict = {}


def _cost_key(key) -> bytes:
    """The cost key of a Dask key: its prefix, as Dask's own scheduler groups durations
    ("inc-123" and "('inc-abc', 4)" are both "inc")."""
    prefix = key_split(key)
    b = _cost_keys.get(prefix)
    if b is None:
        b = _cost_keys[prefix] = cost_key_text(str(prefix))
    return b


# ------------------------------------------------------------------------------------------
# Building the gpuflow graph
# ------------------------------------------------------------------------------------------


def _resolve(key, dsk, seen=None):
    """Follows Alias chains to the key that really holds the value."""
    node = dsk.get(key)
    hops = 0
    while isinstance(node, Alias) and node.target != key:
        key = node.target
        node = dsk.get(key)
        hops += 1
        if hops > len(dsk):
            raise RuntimeError(f"gpuflow.dask: alias cycle through {key!r}")
    return key


class _Built:
    __slots__ = ("graph", "data_ids", "index", "dsk")


def _task_options(key, annotations):
    resources = priority = retries = None
    if annotations:
        r = annotations.get("resources")
        if r:
            resources = r.get(key)
        p = annotations.get("priority")
        if p:
            priority = p.get(key)
        t = annotations.get("retries")
        if t:
            retries = t.get(key)
    return resources, priority, retries


def task_name(key) -> bytes:
    """The gpuflow task name of a Dask key: the key as Dask prints it ("inc-abc",
    "('x', 0, 1)"), as UTF-8."""
    text = key if type(key) is str else str(key)
    if "\0" in text:
        text = text.replace("\0", "\\0")
    return text.encode("utf-8", "backslashreplace")


def build(dsk: Mapping, keys_flat, annotations: dict, events=None) -> _Built:
    """A gpuflow graph with one task per computed key of the (task spec) graph `dsk`, each
    named after its key. With `events` (a queue), the bodies report to it (see get)."""
    graph = Graph()
    h = graph.handle
    table = table_of(graph)
    add_body = table.add
    added = table.added
    n = len(dsk)
    index = {}
    data_ids = array("Q", bytes(8 * max(n, 1)))
    base = data_ids.buffer_info()[0]
    outputs = {_resolve(k, dsk) for k in keys_flat}  # an output alias keeps what it names
    add_value = F.gf_graph_add_value
    add_host_value = F.gf_graph_add_host_value
    tasks = []
    aliases = []
    n_inputs = 0
    for i, (key, node) in enumerate(dsk.items()):
        index[key] = i
        if type(node) is Task:  # the common case first
            st = add_value(base + 8 * i, h, None, 0, F.GF_DATA_KEEP if key in outputs else 0)
            if st:
                raise status_error(st)
            tasks.append((i, key, node))
            n_inputs += len(node.dependencies)
        elif isinstance(node, Alias):
            aliases.append(key)
        elif isinstance(node, DataNode):
            vkey = put_value(node.value)
            st = add_host_value(base + 8 * i, h, None, vkey, DESTROY_VALUE_ADDR, 0)
            if st:
                VALUES.pop(vkey, None)
                raise status_error(st)
        else:
            st = add_value(base + 8 * i, h, None, 0, F.GF_DATA_KEEP if key in outputs else 0)
            if st:
                raise status_error(st)
            tasks.append((i, key, node))
            n_inputs += len(node.dependencies)
    if aliases:  # an alias shares the data of the key it names
        for key in aliases:
            target = _resolve(key, dsk)
            if target not in index:
                raise KeyError(f"gpuflow.dask: {key!r} is an alias of {target!r}, which is "
                               f"not in the graph")
            data_ids[index[key]] = data_ids[index[target]]
    inputs = array("Q", bytes(8 * max(n_inputs, 1)))
    in_base = inputs.buffer_info()[0]
    desc = TASK_DESC()
    desc.struct_size = ctypes.sizeof(TASK_DESC)
    desc.output_count = 1
    desc.cpu_fn = BODY_ADDR
    desc_addr = ctypes.addressof(desc)
    add_task = F.gf_graph_add_task
    task_out = ctypes.c_uint64()
    task_out_addr = ctypes.addressof(task_out)
    res_cache: dict = {}
    keep_alive = []
    annotated = bool(annotations) and any(
        annotations.get(k) for k in ("resources", "priority", "retries"))
    pos = 0
    names: set = set()
    for i, key, node in tasks:
        name = task_name(key)
        if name in names:  # two keys that print alike ("('x', 0)" and ('x', 0)): keep unique
            name += b" @%d" % i
        names.add(name)
        desc.name = name
        if HAS_COST_KEY:
            desc.cost_key = _cost_key(key)
        deps = tuple(node.dependencies)
        nd = len(deps)
        if nd:
            for j, d in enumerate(deps):
                try:
                    inputs[pos + j] = data_ids[index[d]]
                except KeyError:
                    raise KeyError(f"gpuflow.dask: {key!r} depends on {d!r}, which is not in "
                                   f"the graph") from None
            desc.inputs = in_base + 8 * pos
            pos += nd
        else:
            desc.inputs = None
        desc.input_count = nd
        desc.outputs = base + 8 * i
        if annotated:
            resources, priority, retries = _task_options(key, annotations)
            _apply_options(desc, key, resources, priority, retries, res_cache, keep_alive)
        if events is None:
            desc.user_data = add_body(_compute, (node, deps))
        else:
            desc.user_data = add_body(_compute_reporting, (node, deps, key, events))
        st = add_task(task_out_addr, h, desc_addr)
        if st:
            table.discard()
            raise status_error(st)
        added(task_out.value)
    b = _Built()
    b.graph, b.data_ids, b.index, b.dsk = graph, data_ids, index, dsk
    return b


def _apply_options(desc, key, resources, priority, retries, res_cache, keep_alive):
    if resources:
        if not isinstance(resources, Mapping):
            raise TypeError(f"gpuflow.dask: the resources annotation of {key!r} must be a "
                            f"mapping such as {{'GPU': 1}}, not {resources!r}")
        rkey = tuple(sorted((str(k), float(v)) for k, v in resources.items()))
        hit = res_cache.get(rkey)
        if hit is None:
            arr, count, names = resource_array(dict(rkey))
            hit = res_cache[rkey] = (ctypes.addressof(arr), count)
            keep_alive.append((arr, names))
        desc.resources, desc.resource_count = hit
        cpu, gpu = bodies_for(resources, None)
        desc.gpu_fn = GPU_BODY_ADDR if gpu else None
    else:
        desc.resources, desc.resource_count = None, 0
        desc.gpu_fn = None
    desc.priority = int(priority) if priority is not None else 0
    desc.retries = int(retries) if retries is not None else 0


# ------------------------------------------------------------------------------------------
# The scheduler
# ------------------------------------------------------------------------------------------


def _flatten(keys, out):
    for k in keys:
        if isinstance(k, list):
            _flatten(k, out)
        else:
            out.append(k)
    return out


def _nested(keys, values):
    if isinstance(keys, list):
        return tuple(_nested(k, values) for k in keys)
    return values[keys]


def _in_task_body() -> bool:
    return bool(current_ctx())


class _Ready(dict):
    """Dask's state["ready"] (a list in Dask) as an ordered set: gpuflow starts ready keys in
    its own order, so removing any of them must be cheap."""

    __slots__ = ()

    def append(self, key):
        self[key] = None

    def remove(self, key):
        del self[key]

    def pop(self, *args):
        if args:
            return dict.pop(self, *args)
        return self.popitem()[0]


def _no_order(key):
    return 0


class _Reporter:
    """Calls Dask's local-scheduler callbacks on the caller's thread, keeping Dask's state dict
    (start_state_from_dask, finish_task) up to date from what task bodies report."""

    def __init__(self, callbacks, graph, keys_flat, pool):
        from dask.callbacks import normalize_callback, unpack_callbacks
        self.callbacks = [normalize_callback(cb) for cb in callbacks]
        _, _, self.pretask, self.posttask, _ = unpack_callbacks(self.callbacks)
        self.graph = graph
        self.results = set(keys_flat)
        self.started = []
        self.state: dict = {}
        self.names = [w.name for w in pool.workers()]
        self.events = queue.SimpleQueue()
        self.pending = 0  # keys of the state still to be reported finished
        self.workers: dict = {}  # key -> the worker that ran it (an alias: its target's)

    def start(self):
        from dask.local import start_state_from_dask
        graph = self.graph
        for cb in self.callbacks:
            if cb[0]:
                cb[0](graph)
            self.started.append(cb)
        self.state = state = start_state_from_dask(graph, keys=self.results, cache=None,
                                                   sortkey=_no_order)
        state["ready"] = _Ready.fromkeys(state["ready"])
        self.pending = sum(1 for k in state["dependencies"]
                           if k in graph and not isinstance(graph[k], DataNode))
        for cb in self.callbacks:
            if cb[1]:
                cb[1](graph, state)
        self._aliases(list(state["ready"]))

    def _pre(self, key):
        state = self.state
        if key not in state["dependencies"]:
            return False  # not needed for the keys asked for: Dask would not run it
        state["ready"].pop(key, None)
        state["running"].add(key)
        for f in self.pretask:
            f(key, self.graph, state)
        return True

    def _post(self, key, result, worker):
        from dask.local import finish_task
        state = self.state
        if key not in state["dependencies"]:
            return
        state["cache"][key] = result
        self.workers[key] = worker
        finish_task(self.graph, key, state, self.results, _no_order)
        self.pending -= 1
        for f in self.posttask:
            f(key, result, self.graph, state, worker)
        self._aliases(state["dependents"][key])

    def _aliases(self, candidates):
        """Reports the aliases among `candidates` that are ready: they run no body."""
        graph, state = self.graph, self.state
        for k in list(candidates):
            node = graph.get(k)
            if isinstance(node, Alias) and k in state["ready"]:
                self._pre(k)
                self._post(k, state["cache"].get(node.target),
                           self.workers.get(node.target))

    def handle(self, event):
        kind, key, result, worker = event
        if kind == _PRE:
            self._pre(key)
        else:
            self._post(key, result,
                        self.names[worker] if worker < len(self.names) else worker)

    def wait(self, run, progress=False) -> int:
        """Waits for the run, calling the callbacks as bodies report; Ctrl-C and `progress`
        as wait_run."""
        events, handle = self.events, run.handle
        shown = run_watcher(handle, progress)
        try:
            while True:
                if self.pending <= 0:
                    st = F.gf_run_wait(handle, WAIT_SLICE_MS)
                    if st != F.GF_TIMEOUT:
                        break
                else:
                    try:
                        self.handle(events.get(timeout=0.05))
                    except queue.Empty:
                        st = F.gf_run_poll(handle)
                        if st != F.GF_TIMEOUT:
                            break
                if shown is not None:
                    shown.tick()
        except KeyboardInterrupt:
            interrupted(handle, run._pool_handle)
            raise
        finally:
            if shown is not None:
                shown.close()
        while True:  # what the last bodies reported before the run finished
            try:
                self.handle(events.get_nowait())
            except queue.Empty:
                break
        return st

    def finish(self, failed: bool):
        for cb in self.started:
            if cb[4]:
                cb[4](self.graph, self.state, failed)


def get(dsk, keys, pool: Pool | None = None, callbacks=None, progress: bool | None = None,
        **kwargs):
    """Dask scheduler entry point: computes `keys` of `dsk` on a gpuflow pool and returns their
    values in the nested shape of `keys`.

    pool: a gpuflow.Pool; default: dask.config "gpuflow.pool", else default_pool().
    callbacks: Dask local-scheduler callbacks, as for dask.local.get_async (default: the
    active ones, e.g. ``with ProgressBar():``).
    progress: gpuflow's progress bar on stderr (see gpuflow._progress): None (default:
    dask.config "gpuflow.progress", else shown when interactive and the run lasts over a
    second, unless a Dask callback such as ProgressBar is active), True, False.
    Other keyword arguments (num_workers, ...) are accepted and ignored.
    """
    if _in_task_body():
        from dask.local import get_sync
        return get_sync(dsk, keys, callbacks=callbacks)
    from dask.callbacks import local_callbacks
    if pool is None:
        pool = dask.config.get("gpuflow.pool", None) or default_pool()
    if progress is None:
        progress = as_setting(dask.config.get("gpuflow.progress", None))
    with local_callbacks(callbacks) as active:
        if not active:
            return _get(dsk, keys, pool, None, progress)
        # A ProgressBar (or any callback: it may draw its own) reports already: one bar only.
        return _get(dsk, keys, pool, active, False if progress is None else progress)


def _get(dsk, keys, pool, callbacks, progress=None):
    graph, annotations = annotations_of(dsk)
    graph = convert_legacy_graph(graph)
    keys_flat = _flatten(keys, []) if isinstance(keys, list) else [keys]
    for k in keys_flat:
        if k not in graph:
            raise KeyError(k)
    reporter = None
    succeeded = False
    try:
        if callbacks:
            reporter = _Reporter(callbacks, graph, keys_flat, pool)
            reporter.start()
        if not graph:
            succeeded = True
            return _nested(keys, {})
        built = build(graph, keys_flat, annotations,
                      reporter.events if reporter is not None else None)
        try:
            run = built.graph.submit(pool)
        except BaseException:
            built.graph.close()
            raise
        try:
            if reporter is not None:
                st = reporter.wait(run, progress)
            else:
                st = wait_run(run.handle, None, run._pool_handle, progress)
            if st < 0:
                raise failure_exception(st, F.last_error(), table_of(built.graph), run.handle)
            results = {}
            p = ctypes.c_void_p()
            p_addr = ctypes.addressof(p)
            rh = run.handle
            for k in keys_flat:
                if k in results:
                    continue
                target = _resolve(k, graph)
                node = graph[target]
                if isinstance(node, DataNode):
                    results[k] = node.value
                    continue
                st = F.gf_run_value(p_addr, rh, built.data_ids[built.index[target]])
                if st:
                    raise status_error(st)
                results[k] = VALUES[p.value]
            succeeded = True
            return _nested(keys, results)
        finally:
            run.close()
            built.graph.close()
    finally:
        if reporter is not None:
            reporter.finish(not succeeded)


def register() -> None:
    """Registers get as Dask's "gpuflow" scheduler (done on import of gpuflow.dask), so that
    ``dask.config.set(scheduler="gpuflow")`` and ``x.compute(scheduler="gpuflow")`` use it."""
    from dask.base import named_schedulers
    named_schedulers["gpuflow"] = get


register()


if __name__ == "__main__":
    from ._dask_worker import main
    raise SystemExit(main())
