"""Graph documents on a Dask cluster: ``python -m gpuflow.dask run SCHEDULER graph.json``.

A language-neutral graph document (JSON or binary; docs/graph-format.md) whose bodies are kernel
names or commands runs across a Dask cluster's workers: each task of the document becomes one
Dask task, annotated with the document's resources (so {"GPU": 1} goes to GPU workers, such as
those of gpuflow-dask-worker) and priority. On its worker it runs through that worker's own
gpuflow pool (created once per worker process, with the kernel plugins given by --plugin): a
one-task document made of the task and its input bytes, whose outputs come back as bytes that
Dask moves to the workers that need them. So a C, Rust or Julia program that writes a document
gets a multi-node GPU cluster without Python code of its own.

Data that crosses tasks must be buffers (bytes); a document whose opaque values pass between
tasks is refused naming the value. The document is verified (gf_graph_deserialize: untrusted
input is fine) before anything is sent to the cluster.
"""
from __future__ import annotations

import base64
import ctypes
import json
import threading
from ctypes import byref, c_uint64, c_void_p

from . import _ffi as F
from ._errors import GpuflowError, check, status_error

_POOLS: dict[tuple, object] = {}
_POOLS_LOCK = threading.Lock()


def read_document(raw: bytes) -> dict:
    """The document as JSON (any format in, checked by the library), as a dict."""
    graph = c_void_p()
    check(F.gf_graph_deserialize(byref(graph), raw, len(raw), F.GF_GRAPH_FORMAT_AUTO, 0))
    try:
        out = F.gf_bytes()
        check(F.gf_graph_serialize(byref(out), graph, F.GF_GRAPH_FORMAT_JSON))
        try:
            text = ctypes.string_at(out.data, out.size)
        finally:
            F.gf_bytes_free(byref(out))
    finally:
        F.gf_graph_destroy(graph)
    return json.loads(text)


def _worker_pool(plugins: tuple):
    """This worker process's gpuflow pool with `plugins` loaded, made on first use."""
    from ._pool import Pool

    with _POOLS_LOCK:
        pool = _POOLS.get(plugins)
        if pool is None:
            pool = Pool()
            for path in plugins:
                check(F.gf_pool_load_plugin(pool.handle, path.encode()))
            _POOLS[plugins] = pool
        return pool


def _literal(entry: dict) -> bool:
    return any(k in entry for k in ("text", "bytes", "base64"))


def run_task(task: dict, data: dict, plugins: tuple, *inputs):
    """Runs one task of a document on this worker's pool. `data`: the document's data entries
    the task touches, by index; `inputs`: for each non-literal input, in order, the producer's
    {data index: bytes}. Returns {output data index: bytes}."""
    produced: dict[int, bytes] = {}
    for result in inputs:
        produced.update(result)
    entries, index = [], {}

    def add(d: int, entry: dict) -> int:
        if d not in index:
            index[d] = len(entries)
            entries.append(entry)
        return index[d]

    for d in task.get("inputs", []):
        entry = dict(data[d])
        if not _literal(entry):
            bytes_in = produced[d]
            entry.pop("size", None)
            entry.pop("keep", None)
            entry["base64"] = base64.b64encode(bytes_in).decode()
        add(d, entry)
    for d in task.get("outputs", []):
        add(d, {**data[d], "keep": True})
    one = {k: v for k, v in task.items() if k not in ("inputs", "outputs", "after")}
    one["inputs"] = [index[d] for d in task.get("inputs", [])]
    one["outputs"] = [index[d] for d in task.get("outputs", [])]
    doc = json.dumps({"format_version": 2, "data": entries, "tasks": [one]}).encode()

    pool = _worker_pool(plugins)
    graph, run = c_void_p(), c_void_p()
    check(F.gf_graph_deserialize(byref(graph), doc, len(doc), F.GF_GRAPH_FORMAT_JSON, 0))
    try:
        check(F.gf_graph_submit(byref(run), pool.handle, graph, None))
        try:
            status = F.gf_run_wait(run, -1)
            if status != F.GF_OK:
                raise status_error(status)
            out = {}
            for d in task.get("outputs", []):
                handle = c_uint64()
                check(F.gf_graph_data_at(byref(handle), graph, index[d]))
                size = c_uint64()
                check(F.gf_run_fetch(byref(size), run, handle.value, None, 0))
                buffer = ctypes.create_string_buffer(size.value)
                check(F.gf_run_fetch(byref(size), run, handle.value, buffer, size.value))
                out[d] = buffer.raw[:size.value]
            return out
        finally:
            F.gf_run_destroy(run)
    finally:
        F.gf_graph_destroy(graph)


def dask_graph(doc: dict, plugins: tuple, token: str):
    """(Dask graph {key: task}, {key: annotations}, {data index: producing key}) for `doc`."""
    from dask._task_spec import Task, TaskRef

    data, tasks = doc.get("data", []), doc.get("tasks", [])
    producer: dict[int, int] = {}
    for t, task in enumerate(tasks):
        for d in task.get("outputs", []):
            producer[d] = t
    consumers: dict[int, int] = {}
    for task in tasks:
        for d in task.get("inputs", []):
            consumers[d] = consumers.get(d, 0) + 1
    for d, t in producer.items():
        if data[d].get("kind") == "Value" and consumers.get(d):
            name = data[d].get("name") or f"data #{d}"
            raise GpuflowError(f"{name} is an opaque value passed between tasks: only buffers "
                               "(bytes) can move between a Dask cluster's workers")

    def key(t):
        return (f"gpuflow-doc-{token}", t)

    graph, annotations = {}, {}
    for t, task in enumerate(tasks):
        upstream = []
        for d in task.get("inputs", []):
            if not _literal(data[d]) and key(producer[d]) not in upstream:
                upstream.append(key(producer[d]))
        touched = {d: data[d] for d in [*task.get("inputs", []), *task.get("outputs", [])]}
        graph[key(t)] = Task(key(t), run_task, task, touched, plugins,
                             *(TaskRef(k) for k in upstream))
        after = [key(a) for a in task.get("after", []) if key(a) not in upstream]
        if after:  # order only: a task that consumes nothing of the one it must follow
            graph[key(t)] = Task(key(t), _after, graph[key(t)], *(TaskRef(k) for k in after))
        resources = {r["name"]: r["amount"] for r in task.get("resources", [])
                     if "name" in r and "amount" in r}
        meta = {}
        if resources:
            meta["resources"] = resources
        if task.get("priority"):
            meta["priority"] = task["priority"]
        annotations[key(t)] = meta
    return graph, annotations, {d: key(t) for d, t in producer.items()}


def _after(result, *_ordering_only):
    return result


def run_on_cluster(client, document, plugins=()):
    """Runs `document` (its bytes, or what read_document made of them) on the Dask cluster of
    `client`; returns {data name: bytes} for its outputs that no task consumes or that it keeps
    (as gpuflow run --show-outputs shows)."""
    import uuid

    doc = document if isinstance(document, dict) else read_document(document)
    plugins = tuple(plugins)
    graph, annotations, made_by = dask_graph(doc, plugins, uuid.uuid4().hex[:12])
    data, tasks = doc.get("data", []), doc.get("tasks", [])
    consumed = {d for task in tasks for d in task.get("inputs", [])}
    wanted = sorted(d for d in made_by if d not in consumed or data[d].get("keep"))
    keys = sorted({made_by[d] for d in wanted})
    by_key = dict(zip(keys, _compute(client, graph, annotations, keys)))
    return {data[d].get("name") or f"data #{d}": by_key[made_by[d]][d] for d in wanted}


def _compute(client, graph, annotations, keys):
    """client.get with per-key annotations (resources, priority) the scheduler honours."""
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    layers, deps = {}, {}
    # One layer per distinct annotation set: HighLevelGraph carries annotations per layer.
    groups: dict[str, dict] = {}
    for k, task in graph.items():
        label = json.dumps(annotations.get(k, {}), sort_keys=True)
        groups.setdefault(label, {})[k] = task
    for i, (label, part) in enumerate(groups.items()):
        name = f"gpuflow-doc-layer-{i}"
        layers[name] = MaterializedLayer(part, annotations=json.loads(label) or None)
        deps[name] = set()
    hlg = HighLevelGraph(layers, deps)
    return client.get(hlg, keys)


def describe(value: bytes) -> str:
    """A short rendering of an output, as gpuflow run --show-outputs gives it."""
    import struct

    text = f"{len(value)} byte{'' if len(value) == 1 else 's'}"
    if len(value) == 8:
        text += f", int64 {struct.unpack('<q', value)[0]}, double {struct.unpack('<d', value)[0]!r}"
    if 0 < len(value) <= 256:
        try:
            decoded = value.decode()
            if decoded.isprintable():
                return text + f", text {json.dumps(decoded)}"
        except UnicodeDecodeError:
            pass
        return text + f", hex {value.hex()}"
    return text


def run_main(argv) -> int:
    """python -m gpuflow.dask run SCHEDULER DOCUMENT [--plugin LIB]... [--timeout S]"""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m gpuflow.dask run",
                                description="Run a gpuflow graph document on a Dask cluster.")
    p.add_argument("scheduler", help="the Dask scheduler, e.g. tcp://10.0.0.1:8786")
    p.add_argument("document", help="a graph document, JSON or binary; '-' reads stdin")
    p.add_argument("--plugin", action="append", default=[],
                   help="kernel plugin library the workers load (a path valid on every node)")
    p.add_argument("--timeout", type=float, default=60, help="seconds to reach the scheduler")
    args = p.parse_args(argv)
    try:
        raw = sys.stdin.buffer.read() if args.document == "-" else open(args.document,
                                                                          "rb").read()
    except OSError as e:
        print(f"gpuflow run --dask: cannot read {args.document}: {e.strerror}", file=sys.stderr)
        return 2
    from distributed import Client

    try:
        doc = read_document(raw)  # refused here, before anything reaches the cluster
    except GpuflowError as e:
        print(f"gpuflow run --dask: {args.document}: {e}", file=sys.stderr)
        return 2
    with Client(args.scheduler, timeout=args.timeout) as client:
        try:
            outputs = run_on_cluster(client, doc, args.plugin)
        except GpuflowError as e:
            print(f"gpuflow run --dask: {e}", file=sys.stderr)
            return 1
    print("outputs:")
    for name, value in outputs.items():
        print(f"  {name}: {describe(value)}")
    if not outputs:
        print("  (none kept)")
    return 0
