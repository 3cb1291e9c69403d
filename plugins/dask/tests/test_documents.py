"""Graph documents on a Dask cluster (python -m gpuflow.dask run SCHEDULER DOCUMENT, and
gpuflow run DOCUMENT --dask SCHEDULER): the seed
document's result equals what `gpuflow run` computes, tasks asking for GPUs run on GPU workers
only, a failing kernel fails the run naming it, and a malformed document is refused before
anything reaches the cluster."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("distributed")
from distributed import Client, get_task_stream  # noqa: E402

import gpuflow  # noqa: E402
from gpuflow._dask_documents import run_on_cluster  # noqa: E402
from gpuflow.dask import LocalGPUCluster  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
SEED = os.path.join(ROOT, "examples", "json", "seed.json")


def _built(*parts):
    build = os.path.dirname(os.path.dirname(os.path.realpath(gpuflow.library_path)))
    path = os.path.join(build, *parts)
    if not os.path.exists(path):
        pytest.skip(f"{path} is not built")
    return path


@pytest.fixture(scope="module")
def cluster():
    with LocalGPUCluster(service_options=dict(backend="host", emulated_devices=2),
                         dashboard_address=None) as c:
        yield c


def _run(cluster, document, *extra, input=None):
    return subprocess.run([sys.executable, "-m", "gpuflow.dask", "run",
                           cluster.scheduler_address, document, *extra], input=input,
                          capture_output=True, text=True, timeout=300)


def test_seed_document_gives_what_gpuflow_run_gives(cluster):
    plugin = _built("examples", "seed_kernels.so")
    local = subprocess.run([_built("tools", "gpuflow", "gpuflow"), "run", SEED, "--plugin",
                            plugin, "--show-outputs", "--quiet"], capture_output=True, text=True,
                           timeout=120)
    assert local.returncode == 0, local.stderr
    on_dask = _run(cluster, SEED, "--plugin", plugin)
    assert on_dask.returncode == 0, on_dask.stderr[-3000:]
    line = [ln for ln in local.stdout.splitlines() if ln.strip().startswith("result:")]
    assert line and line[0].strip() in on_dask.stdout, (local.stdout, on_dask.stdout)


def test_the_gpuflow_command_runs_documents_on_dask(cluster, tmp_path):
    """gpuflow run --dask: the C command hands the document to the Python side."""
    cli, plugin = _built("tools", "gpuflow", "gpuflow"), _built("examples", "seed_kernels.so")
    env = dict(os.environ, GPUFLOW_PYTHON=sys.executable)
    env.pop("GPUFLOW_LIBRARY", None)  # the command says which library it runs on
    done = subprocess.run([cli, "run", SEED, "--dask", cluster.scheduler_address, "--plugin",
                           plugin], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "result: 8 bytes" in done.stdout, done.stdout
    env["GPUFLOW_PYTHON"] = str(tmp_path / "no-such-python")
    done = subprocess.run([cli, "run", SEED, "--dask", cluster.scheduler_address],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2 and "no-such-python" in done.stderr, done.stderr
    done = subprocess.run([cli, "run", SEED, "--dask", cluster.scheduler_address, "--pool",
                           "unix:///x"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2 and "--dask" in done.stderr, done.stderr


def test_tasks_asking_for_gpus_run_on_gpu_workers_only(cluster):
    plugin = _built("examples", "seed_kernels.so")
    doc = json.load(open(SEED))
    for task in doc["tasks"]:
        if task.get("kernel") == "seed.chunk":
            task["resources"] = [{"name": "GPU", "amount": 1}]
    plain = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                              cluster.scheduler_address, "--nthreads", "2", "--no-nanny",
                              "--name", "plain"], stderr=subprocess.DEVNULL)
    try:
        with Client(cluster.scheduler_address) as client:
            client.wait_for_workers(3, timeout=60)
            gpu_workers = {a for a, w in client.scheduler_info()["workers"].items()
                           if w["resources"].get("GPU")}
            with get_task_stream(client) as stream:
                outputs = run_on_cluster(client, json.dumps(doc).encode(), [plugin])
            assert set(outputs) == {"result"}
            chunk_tasks = {t for t, task in enumerate(doc["tasks"])
                           if task.get("kernel") == "seed.chunk"}
            ran = [(s["key"], s["worker"]) for s in stream.data]
            chunk_runs = [w for key, w in ran if isinstance(key, tuple) and key[1] in chunk_tasks]
            assert len(chunk_runs) == len(chunk_tasks)
            assert set(chunk_runs) <= gpu_workers, ran
    finally:
        plain.terminate()
        plain.wait(timeout=30)


def test_a_failing_kernel_fails_the_run_naming_it(cluster, tmp_path):
    plugin = _built("examples", "seed_kernels.so")
    doc = json.load(open(SEED))
    for entry in doc["data"]:
        if "text" in entry and entry["text"].count(" ") == 1:  # "EXPECTED TOLERANCE"
            entry["text"] = "1 0.001"
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(doc))
    done = _run(cluster, str(path), "--plugin", plugin)
    assert done.returncode == 1, done.stdout
    assert "seed.check: the sum is" in done.stderr and "expected 1.000" in done.stderr, \
        done.stderr[-3000:]


def test_malformed_documents_are_refused_before_the_cluster_sees_them(cluster, tmp_path):
    cyclic = {"data": [{"name": "a", "size": 8}, {"name": "b", "size": 8}],
              "tasks": [{"name": "x", "kernel": "k", "inputs": [1], "outputs": [0]},
                        {"name": "y", "kernel": "k", "inputs": [0], "outputs": [1]}]}
    for text, culprit in ((json.dumps(cyclic), "cycle"), ("{not json", "JSON"),
                          ("\x00garbage", "")):
        done = _run(cluster, "-", input=text)
        assert done.returncode == 2, (text, done.stdout)
        assert "gpuflow run --dask: -:" in done.stderr and culprit in done.stderr, done.stderr
    done = _run(cluster, str(tmp_path / "missing.json"))
    assert done.returncode == 2 and "cannot read" in done.stderr
