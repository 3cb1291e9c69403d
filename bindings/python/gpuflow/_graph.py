"""Graphs: building a graph of Python tasks (Graph, its Task and Data objects).

Internal API for gpuflow.dask: table_of(graph) (the graph's BodyTable), bodies_for,
resource_array.
"""
from __future__ import annotations

import ctypes
import weakref
from ctypes import byref, c_uint64, c_void_p

from . import _ffi as F
from ._bodies import (BODY_ADDR, GPU_BODY_ADDR, HAS_COST_KEY, TASK_DESC, BodyTable, cost_key_of,
                      input_value)
from ._errors import StateError, check, status_error
from ._run import Run
from ._values import DESTROY_VALUE_ADDR, VALUES, put_value, size_estimate


class Data:
    """A data object of one graph: a task's output value or a host value."""

    __slots__ = ("graph", "id", "name")

    def __init__(self, graph, id_, name=None):
        self.graph = graph
        self.id = id_
        self.name = name

    def __repr__(self):
        return f"<gpuflow.Data {self.name or self.id}>"


class Task:
    """A task of one graph; ``output`` is the Data holding its return value. Passing a Task (or
    Data) as an argument of another task makes it an input."""

    __slots__ = ("graph", "id", "output", "name", "index")

    def __init__(self, graph, id_, output, name, index):
        self.graph = graph
        self.id = id_
        self.output = output
        self.name = name
        self.index = index

    def __repr__(self):
        return f"<gpuflow.Task {self.name or self.index}>"


_GPU_RESOURCES = ("GPU", "gpu_memory")


def bodies_for(resources, where):
    """(cpu_fn, gpu_fn) presence for a task: GPU requests (or where='gpu') get both bodies."""
    if where is None:
        where = "gpu" if resources and any(r in resources for r in _GPU_RESOURCES) else "cpu"
    if where == "cpu":
        return True, False
    if where == "gpu":
        return True, True  # only GPU workers offer GPU resources; CPU body kept for 'any'
    if where == "any":
        return True, True
    raise ValueError(f"where must be 'cpu', 'gpu', 'any' or None, not {where!r}")


def resource_array(resources: dict | None):
    """(ctypes array of gf_resource, count, keep-alive list) for a {name: amount} mapping."""
    if not resources:
        return None, 0, ()
    names = [str(k).encode() for k in resources]
    arr = (F.gf_resource * len(names))()
    for i, (n, amount) in enumerate(zip(names, resources.values())):
        arr[i].name = n
        arr[i].amount = float(amount)
    return arr, len(names), names


def _call(ctx, spec):
    """What a Graph.task body computes: fn with its arguments, inputs read from gpuflow."""
    fn, args, kwargs, refs = spec
    if refs:
        args = list(args)
        kwargs = dict(kwargs)
        for i, (pos, name) in enumerate(refs):
            v = input_value(ctx, i)
            if name is None:
                args[pos] = v
            else:
                kwargs[name] = v
    return fn(*args, **kwargs)


def table_of(graph: "Graph") -> BodyTable:
    """The BodyTable of a Graph: how gpuflow.dask adds its own tasks to one."""
    return graph._table


class Graph:
    """A graph of Python tasks, built on one thread, then submitted any number of times."""

    def __init__(self):
        handle = c_void_p()
        check(F.gf_graph_create(byref(handle)))
        self._handle = handle.value
        self._finalizer = weakref.finalize(self, F.gf_graph_destroy, self._handle)
        try:
            self._table = BodyTable(self._handle)
        except BaseException:
            self._finalizer()
            raise
        self._desc = TASK_DESC()
        self._desc.struct_size = ctypes.sizeof(TASK_DESC)
        self._out = c_uint64()
        self._resource_cache = {}
        self.tasks: list[Task] = []

    @property
    def handle(self) -> int:
        if not self._finalizer.alive:
            raise StateError("the graph was destroyed", F.GF_ERR_STATE)
        return self._handle

    def close(self):
        """Drops the graph; runs already submitted keep what they need."""
        self._finalizer()

    def __len__(self):
        n = c_uint64()
        check(F.gf_graph_task_count(byref(n), self.handle))
        return n.value

    def _resources(self, resources):
        if not resources:
            return None, 0
        key = tuple(sorted((str(k), float(v)) for k, v in resources.items()))
        hit = self._resource_cache.get(key)
        if hit is None:
            arr, n, keep = resource_array(dict(key))
            hit = (arr, n, keep)
            self._resource_cache[key] = hit
        return ctypes.addressof(hit[0]), hit[1]

    def value(self, obj, name: str | None = None) -> Data:
        """A graph input holding the Python object `obj` (released with the graph)."""
        key = put_value(obj)
        out = c_uint64()
        st = F.gf_graph_add_host_value(byref(out), self.handle, name.encode() if name else None,
                                       key, DESTROY_VALUE_ADDR, size_estimate(obj))
        if st != 0:
            VALUES.pop(key, None)
            raise status_error(st)
        return Data(self, out.value, name)

    def task(self, fn, *args, resources: dict | None = None, priority: int = 0,
             retries: int = 0, where: str | None = None, name: str | None = None,
             keep: bool = False, after=(), **kwargs) -> Task:
        """Adds a task computing fn(*args, **kwargs). Task or Data arguments (top level of
        args and kwargs) become inputs: the body receives their values.

        resources: {name: amount} held while the body runs, e.g. {"GPU": 1}, {"bigmem": 1}.
        priority: higher runs first among ready tasks. retries: re-runs on failure.
        where: 'cpu', 'gpu' or 'any' worker kinds; default: 'gpu' if resources ask for GPU or
        gpu_memory, else 'cpu'. keep: keep the output after its consumers ran, so
        Run.value() can read it. after: tasks this one runs after (ordering only).
        """
        if not callable(fn):
            raise TypeError(f"{fn!r} is not callable")
        handle = self.handle
        inputs = []
        refs = []
        for pos, a in enumerate(args):
            if isinstance(a, (Task, Data)):
                inputs.append(self._data_of(a))
                refs.append((pos, None))
        for k, v in kwargs.items():
            if isinstance(v, (Task, Data)):
                inputs.append(self._data_of(v))
                refs.append((None, k))
        # the refs entries name where each input goes: (position, None) or (None, keyword)
        refs = tuple((p if p is not None else 0, k) for p, k in refs)
        out = c_uint64()
        check(F.gf_graph_add_value(byref(out), handle, None, 0, F.GF_DATA_KEEP if keep else 0))
        output = Data(self, out.value, name)
        cpu, gpu = bodies_for(resources, where)
        table = self._table
        d = self._desc
        d.name = name.encode() if name else None
        d.cpu_fn = BODY_ADDR if cpu else None
        d.gpu_fn = GPU_BODY_ADDR if gpu else None
        if HAS_COST_KEY:
            d.cost_key = cost_key_of(fn)
        d.resources, d.resource_count = self._resources(resources)
        d.priority = int(priority)
        d.retries = int(retries)
        in_arr = (c_uint64 * len(inputs))(*inputs) if inputs else None
        d.inputs = ctypes.addressof(in_arr) if inputs else None
        d.input_count = len(inputs)
        out_arr = (c_uint64 * 1)(out.value)
        d.outputs = ctypes.addressof(out_arr)
        d.output_count = 1
        after_ids = [t.id for t in after]
        after_arr = (c_uint64 * len(after_ids))(*after_ids) if after_ids else None
        d.after = ctypes.addressof(after_arr) if after_ids else None
        d.after_count = len(after_ids)
        tid = c_uint64()
        d.user_data = table.add(_call, (fn, args, kwargs, refs))
        st = F.gf_graph_add_task(byref(tid), handle, byref(d))
        if st != 0:
            table.discard()
            raise status_error(st)
        table.added(tid.value)
        t = Task(self, tid.value, output, name, len(self.tasks))
        self.tasks.append(t)
        return t

    def _data_of(self, a) -> int:
        if a.graph is not self:
            raise ValueError(f"{a!r} belongs to another graph")
        return a.output.id if isinstance(a, Task) else a.id

    def after(self, task: Task, before: Task):
        """Adds an ordering edge: `task` runs after `before`."""
        check(F.gf_graph_add_dependency(self.handle, task.id, before.id))

    def submit(self, pool, progress: bool | None = None) -> Run:
        """Validates the graph against `pool` (a Pool) and starts running it. `progress`: the
        Run's progress bar (None: when interactive, True: always, False: never)."""
        run = c_void_p()
        check(F.gf_graph_submit(byref(run), pool.handle, self.handle, None))
        return Run(run.value, self._table, pool, progress)
