"""`snakemake --executor gpuflow` against a real service with 3 emulated devices: distinct
devices for overlapping GPU jobs, failures, Ctrl-C and impossible requests, each ending with the
service's ledger back to nothing."""
import itertools
import pkgutil
import subprocess
import sys
import time

import pytest

from snakemake_testing import (DEVICES, PLUGIN_SRC, alive, interrupt, leases_left,
                               run_snakemake, start_snakemake, status, write_workflow)

from snakemake_executor_plugin_gpuflow import LeaseRequest, lease_request, parse_size

GPU_JOBS = 12
CPU_JOBS = 2

# Each job records what it was given and when it ran; `date +%s.%N` is the job's own clock.
RECORDING_WORKFLOW = f"""
rule all:
    input:
        expand("out/gpu{{i}}.txt", i=range({GPU_JOBS})),
        expand("out/cpu{{i}}.txt", i=range({CPU_JOBS})),
        "out/pipe.txt"

rule gpu:
    output: "out/gpu{{i}}.txt"
    resources: gpu=1
    shell:
        "start=$(date +%s.%N); sleep 0.$(( {{wildcards.i}} % 4 + 2 )); "
        "echo \\"$CUDA_VISIBLE_DEVICES ${{{{GPUFLOW_LEASE_ID:-none}}}} $start $(date +%s.%N)\\""
        " > {{output}}"

rule cpu:
    output: "out/cpu{{i}}.txt"
    shell: "echo \\"${{{{CUDA_VISIBLE_DEVICES:-none}}}}\\" > {{output}}"

# Snakemake runs both ends of a pipe together as one group job: one process, one lease for the
# group's summed gpu (1), seen by both ends.
rule pipe_head:
    output: pipe("out/pipe")
    resources: gpu=1
    shell: "echo $CUDA_VISIBLE_DEVICES > {{output}}"

rule pipe_tail:
    input: "out/pipe"
    output: "out/pipe.txt"
    shell:
        "start=$(date +%s.%N); read head < {{input}}; sleep 0.3; "
        "echo \\"$head $CUDA_VISIBLE_DEVICES ${{{{GPUFLOW_LEASE_ID:-none}}}} $start "
        "$(date +%s.%N)\\" > {{output}}"
"""


def test_gpu_jobs_get_distinct_devices_and_the_ledger_returns_to_zero(service, tmp_path):
    write_workflow(tmp_path, RECORDING_WORKFLOW)
    rc, out = run_snakemake(tmp_path, "--cores", "6", "--gpuflow-endpoint", service.endpoint)
    assert rc == 0, out
    assert f"leasing from the service at {service.endpoint}" in out

    jobs = []
    for i in range(GPU_JOBS):
        devices, lease_id, start, end = (tmp_path / f"out/gpu{i}.txt").read_text().split()
        assert lease_id != "none", f"gpu{i} ran without a lease"
        jobs.append((f"gpu{i}", set(devices.split(",")), lease_id, float(start), float(end)))
    head, tail, lease_id, start, end = (tmp_path / "out/pipe.txt").read_text().split()
    assert head == tail, f"the ends of a pipe saw {head} and {tail}"
    jobs.append(("pipe", {tail}, lease_id, float(start), float(end)))
    for name, devices, *_ in jobs:
        assert len(devices) == 1 and all(d.startswith("GPU-") for d in devices), (name, devices)
    assert len({lease_id for _, _, lease_id, _, _ in jobs}) == len(jobs), "one lease per job"
    overlapping = 0
    for (a, da, _, sa, ea), (b, db, _, sb, eb) in itertools.combinations(jobs, 2):
        if sa < eb and sb < ea:
            overlapping += 1
            assert not da & db, f"{a} and {b} ran at the same time on {da & db}"
    assert overlapping > 0, "no two GPU jobs ran at the same time: the test shows nothing"
    used = set().union(*(d for _, d, *_ in jobs))
    assert len(used) == DEVICES, f"devices used: {used}"
    for i in range(CPU_JOBS):
        assert (tmp_path / f"out/cpu{i}.txt").read_text().strip() == "none", \
            "a CPU-only job holds no GPU lease"
    assert leases_left(service.endpoint) == []


def test_a_failing_job_fails_the_workflow_and_leaves_no_lease(service, tmp_path):
    write_workflow(tmp_path, """
        rule broken:
            output: "out/broken.txt"
            log: "logs/broken.log"
            resources: gpu=1
            shell: "echo 'the broken job says why' > {log}; exit 3"
        """)
    rc, out = run_snakemake(tmp_path, "--cores", "1", "--gpuflow-endpoint", service.endpoint)
    assert rc != 0, out
    assert "Error in rule broken" in out, out
    assert "logs/broken.log" in out, "Snakemake names the job's log"
    assert "the broken job says why" in out, "--show-failed-logs shows it"
    assert "Exiting because a job execution failed" in out, out
    assert not (tmp_path / "out/broken.txt").exists()
    assert leases_left(service.endpoint) == []


def test_ctrl_c_kills_running_jobs_and_releases_their_leases(service, tmp_path):
    write_workflow(tmp_path, """
        rule all:
            input: expand("out/long{i}.txt", i=range(5))

        rule long:
            output: "out/long{i}.txt"
            resources: gpu=1
            shell:
                "echo $$ > pids/{wildcards.i}.tmp && mv pids/{wildcards.i}.tmp pids/{wildcards.i};"
                " exec sleep 120"
        """)
    (tmp_path / "pids").mkdir()
    proc = start_snakemake(tmp_path, "--cores", "5", "--gpuflow-endpoint", service.endpoint,
                           log=tmp_path / "snakemake.log")
    try:
        # 3 jobs run (one per device), 2 wait in the service's queue.
        deadline = time.monotonic() + 60
        while len(list((tmp_path / "pids").glob("[0-9]"))) < DEVICES:
            assert proc.poll() is None, (tmp_path / "snakemake.log").read_text()
            assert time.monotonic() < deadline, "the jobs never started"
            time.sleep(0.05)
        st = status(service.endpoint)
        assert len(st["leases"]) == DEVICES, st
        holders = [lease["pid"] for lease in st["leases"]]
        jobs = [int(p.read_text()) for p in (tmp_path / "pids").glob("[0-9]")]
        assert all(alive(pid) for pid in jobs + holders)
        rc = interrupt(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "snakemake.log").read_text()
    assert rc != 0, log
    assert "Terminating processes on user request" in log, log
    assert [pid for pid in jobs + holders if alive(pid)] == [], "processes outlived Ctrl-C"
    assert len(list((tmp_path / "pids").glob("[0-9]"))) == DEVICES, \
        "a job waiting for its lease started after Ctrl-C"
    assert leases_left(service.endpoint) == []


def test_more_gpus_than_the_node_has_is_an_error_naming_the_rule(tmp_path):
    # No endpoint: a private service for the run, with 2 emulated devices. `small` runs first
    # on it; `huge` can never be granted.
    write_workflow(tmp_path, """
        rule huge:
            input: "out/small.txt"
            output: "out/huge.txt"
            resources: gpu=3
            shell: "touch {output}"

        rule small:
            output: "out/small.txt"
            resources: gpu=1, gpu_mem_mb=1
            shell: "echo $CUDA_VISIBLE_DEVICES > {output}"
        """)
    # (Were huge's request left waiting instead, the run would end in run_snakemake's timeout.)
    rc, out = run_snakemake(tmp_path, "--cores", "2", "--gpuflow-emulated-devices", "2",
                            "--gpuflow-device-memory", "64MiB")
    assert rc != 0, out
    assert "started a private one for this run" in out and "2 emulated device(s)" in out, out
    assert (tmp_path / "out/small.txt").read_text().startswith("GPU-"), "small had a device"
    assert "Error in rule huge" in out, out
    assert "rule huge (jobid" in out and "asks for gpu=3" in out and "has 2 device(s)" in out, out
    assert not (tmp_path / "out/huge.txt").exists()


def test_a_named_service_that_is_not_there_is_an_error(tmp_path):
    write_workflow(tmp_path, """
        rule one:
            output: "out/one.txt"
            resources: gpu=1
            shell: "touch {output}"
        """)
    missing = f"unix://{tmp_path}/no-service.sock"
    rc, out = run_snakemake(tmp_path, "--cores", "1", "--gpuflow-endpoint", missing, timeout=60)
    assert rc != 0, out
    assert f"no gpuflow service at {missing}" in out and "named by --gpuflow-endpoint" in out, out
    assert "private" not in out, "a named service is never replaced by a private one"
    assert not (tmp_path / "out/one.txt").exists()


def test_an_editable_install_is_where_snakemake_looks_for_plugins(tmp_path):
    # Snakemake finds executor plugins with pkgutil.iter_modules, which sees sys.path entries
    # but not import hooks: the editable install must be a plain path (the src layout's).
    prefix = tmp_path / "prefix"
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install",
                    "--no-deps", "--no-build-isolation", "--no-index", "-e", str(PLUGIN_SRC.parent),
                    "--prefix", str(prefix)], check=True, timeout=120)
    (pth,) = prefix.glob("lib/python*/site-packages/*snakemake_executor_plugin_gpuflow*.pth")
    entry = pth.read_text().strip()
    assert not entry.startswith("import"), f"an import hook, invisible to Snakemake: {entry}"
    assert "snakemake_executor_plugin_gpuflow" in {m.name for m in pkgutil.iter_modules([entry])}


def test_resources_become_lease_requests():
    assert lease_request({}) is None
    assert lease_request({"gpu": 0, "mem_mb": 1000}) is None
    assert lease_request({"gpu": 2}) == LeaseRequest(gpus=2)
    assert lease_request({"gpus": 1}) == LeaseRequest(gpus=1)
    assert lease_request({"gpu": "0.5"}) == LeaseRequest(gpus=0.5)
    assert lease_request({"gpu": 1, "gpu_mem_mb": 8000}) == LeaseRequest(1, 8 * 10**9)
    assert lease_request({"gpu": 1, "gpu_mem_mib": 512}) == LeaseRequest(1, 512 << 20)
    assert lease_request({"gpu": 1, "gpu_mem": "16GiB"}) == LeaseRequest(1, 16 << 30)
    assert LeaseRequest(0.5, 1 << 20).cli_args() == ["--gpus", "0.5", "--gpu-memory", "1048576"]
    for bad, says in [({"gpu": "lots"}, "gpu='lots' is not a number"),
                      ({"gpu": -1}, "non-negative"),
                      ({"gpu": "1.5"}, "whole number"),
                      ({"gpu": 1, "gpus": 2}, "disagree"),
                      ({"gpu_mem_mb": 100}, "needs a gpu resource"),
                      ({"gpu": 1, "gpu_mem_mb": 1, "gpu_mem": "1G"}, "give one of"),
                      ({"gpu": 1, "gpu_mem": "8 bananas"}, "gpu_mem='8 bananas'")]:
        with pytest.raises(ValueError, match=says):
            lease_request(bad)


def test_sizes():
    assert parse_size(123) == 123
    assert parse_size("8G") == parse_size("8GB") == 8 * 10**9
    assert parse_size("1.5GiB") == 3 << 29
    assert parse_size("512k") == 512000
    for bad in ("", "G", "-1G", "1X", True):
        with pytest.raises(ValueError):
            parse_size(bad)
