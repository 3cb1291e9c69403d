"""Results of tasks on GPU workers are device data: they count against the device's memory
(their size: ``nbytes`` or ``dask.sizeof``), a result that cannot fit fails its task with
OutOfMemoryError, and results are spilled to host and brought back under pressure through the
spill/unspill pair of their kind (``gpuflow.register_spillable``)."""
import gc
import threading
import time

import pytest

import gpuflow

np = pytest.importorskip("numpy")

KiB = 1 << 10
MiB = 1 << 20


def tiny_pool(device_memory=1 * MiB):
    return gpuflow.Pool(cpu_workers=2, emulated_devices=1, device_memory=device_memory,
                        backend="host", spill_threshold=0.8)


def gpu_worker(pool):
    return next(w.index for w in pool.workers() if w.kind == "gpu")


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return pred()
        gc.collect()
        time.sleep(0.01)
    return True


def test_numpy_chunk_larger_than_the_device_fails_out_of_memory():
    # The case: a 32 MB NumPy chunk made by a GPU=1 task on a 1 MiB device.
    with tiny_pool() as pool:
        g = gpuflow.Graph()
        t = g.task(lambda: np.ones(4_000_000), resources={"GPU": 1}, name="chunk-0")
        run = pool.run(g)
        with pytest.raises(gpuflow.OutOfMemoryError) as info:
            run.result(timeout=60)
        message = str(info.value)
        assert "out of memory" in message and "chunk-0" in message and "32000000" in message
        assert run.task_state(t) == "failed"
        assert pool.device_memory(0).resident == 0
        del run, g
        assert wait_for(lambda: pool.ledger(gpu_worker(pool))["gpu_memory"].in_use == 0)


def test_dask_chunks_annotated_gpu_fail_out_of_memory():
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    import gpuflow.dask as gd
    with tiny_pool() as pool:
        with dask.annotate(resources={"GPU": 1}):
            x = da.ones((4000, 4000), chunks=(1000, 4000))  # 32 MB float64 chunks
            y = x + 1
        with pytest.raises(gpuflow.OutOfMemoryError, match="out of memory"):
            y.sum().compute(scheduler=gd.get, pool=pool)


def test_gpu_results_count_in_device_memory():
    with tiny_pool(4 * MiB) as pool:
        gpu = gpu_worker(pool)
        assert pool.device_memory(0).capacity == 4 * MiB
        g = gpuflow.Graph()
        t = g.task(lambda: np.zeros(100_000), resources={"GPU": 1}, keep=True)  # 800 kB
        run = pool.run(g)
        run.result(timeout=60)
        m = pool.device_memory(0)
        assert m.resident == 800_000 and m.reserved == 0 and m.spilled == 0
        assert pool.ledger(gpu)["gpu_memory"].peak_in_use >= 800_000
        assert isinstance(pool.device_memory(0), gpuflow.DeviceMemory)
        assert run.value(t).nbytes == 800_000
        # CPU results are not device data.
        cpu = pool.submit(lambda: np.zeros(100_000)).result(timeout=60)
        assert cpu.nbytes == 800_000 and pool.device_memory(0).resident == 800_000
        del run, g
        assert wait_for(lambda: pool.device_memory(0).resident == 0)
        assert pool.ledger(gpu)["gpu_memory"].in_use == 0


def test_host_objects_made_on_a_gpu_worker_leave_the_device_at_no_cost():
    # NumPy results of GPU tasks count on the (emulated) device; under pressure they are moved
    # off it as they are (identity spill), and consumers on the device get them back.
    with tiny_pool() as pool:
        g = gpuflow.Graph()
        parts = [g.task(lambda i=i: np.full(300 * KiB // 8, i, dtype=np.int64),
                        resources={"GPU": 1}) for i in range(4)]
        total = g.task(lambda *xs: sum(int(x.sum()) for x in xs), *parts, keep=True)
        run = pool.run(g)
        run.result(timeout=60)
        n = 300 * KiB // 8
        assert run.value(total) == n * (0 + 1 + 2 + 3)
        assert pool.device_memory(0).spilled_total >= 300 * KiB


class DeviceBlob:
    """A stand-in for a CuPy array: its bytes, and whether they are 'on the device'."""

    def __init__(self, data):
        self.data = data
        self.nbytes = data.nbytes


def test_custom_spillable_class_round_trips_under_memory_pressure():
    moves = {"to_host": 0, "to_device": 0}
    lock = threading.Lock()

    def to_host(blob):
        assert isinstance(blob, DeviceBlob)
        with lock:
            moves["to_host"] += 1
        return blob.data.copy()  # the host form: a NumPy array

    def to_device(host):
        assert isinstance(host, np.ndarray)
        with lock:
            moves["to_device"] += 1
        return DeviceBlob(host.copy())

    gpuflow.register_spillable(DeviceBlob, to_host, to_device)
    size = 300 * KiB
    with tiny_pool() as pool:
        gpu = gpu_worker(pool)
        g = gpuflow.Graph()
        blobs = [g.task(lambda i=i: DeviceBlob(np.full(size // 8, i, dtype=np.int64)),
                        resources={"GPU": 1}, name=f"make-{i}") for i in range(4)]
        # A CPU task reads the four in whichever form they are (device or host).
        seen = g.task(lambda *xs: [int(np.asarray(getattr(x, "data", x))[0]) for x in xs],
                      *blobs, where="cpu")

        def check(blob, _seen, i):
            env = gpuflow.current_task().env()
            return (env.kind == "gpu" and type(blob) is DeviceBlob and blob.nbytes == size
                    and bool((blob.data == i).all()))

        checks = [g.task(check, b, seen, i, resources={"GPU": 1}, keep=True)
                  for i, b in enumerate(blobs)]
        run = pool.run(g)
        run.result(timeout=60)
        assert [run.value(c) for c in checks] == [True] * 4
        assert moves["to_host"] > 0 and moves["to_device"] > 0, moves
        m = pool.device_memory(0)
        assert m.spilled_total >= size and m.unspilled_total >= size, m
        peak = pool.ledger(gpu)["gpu_memory"].peak_in_use
        assert 3 * size <= peak <= 1 * MiB
        baseline_free = m
        del run, g, baseline_free
        assert wait_for(lambda: pool.device_memory(0).resident == 0)
        assert pool.device_memory(0).spilled == 0


def test_register_spillable_checks_its_arguments():
    with pytest.raises(TypeError):
        gpuflow.register_spillable(object(), lambda x: x, lambda x: x)
    with pytest.raises(TypeError):
        gpuflow.register_spillable(DeviceBlob, lambda x: x, None)
