"""Snakemake inside one Slurm allocation: a batch job on a Slurm of the test's own
(tests/slurm/slurm_cluster.sh: two nodes on loopback, two fake GPUs each) starts its own pool
(`eval "$(gpuflow serve --per-job --daemon)"`) and runs `snakemake --executor gpuflow` there, as
docs/service.md's recipe says: the executor finds the job's pool through GPUFLOW_POOL, GPU jobs
never share a device beyond it (tests/slurm/ledger_check.py on the ledger the jobs write), both
of the job's devices are used, and the pool is gone with the job. Skipped, with the reason, where
that Slurm cannot start."""
import os
import shlex
import subprocess
import sys
import time

from snakemake_testing import snakemake_command, snakemake_env, write_workflow

import gpuflow

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "slurm"))
from slurm_fixture import LEDGER_CHECK, gpuflow_cli, run_job, slurm_cluster  # noqa: E402

GPU_JOBS = 4

WORKFLOW = f"""
rule all:
    input: expand("out/gpu{{i}}.txt", i=range({GPU_JOBS}))

rule gpu:
    output: "out/gpu{{i}}.txt"
    resources: gpu=1
    shell:
        "start=$(date +%s.%N); sleep 0.5; "
        "echo \\"gpu{{wildcards.i}} 1 $GPUFLOW_DEVICES $start $(date +%s.%N)\\" >> ledger; "
        "touch {{output}}"
"""


def test_snakemake_in_one_allocation_leases_from_the_jobs_pool(tmp_path, monkeypatch):
    cli = gpuflow_cli(gpuflow.library_path)
    with slurm_cluster(tmp_path / "cluster"):
        workdir = tmp_path / "workflow"
        write_workflow(workdir, WORKFLOW)
        jobtmp = tmp_path / "jobtmp"
        jobtmp.mkdir(mode=0o700)
        script = tmp_path / "job.sh"
        script.write_text(
            "#!/bin/bash\n"
            f"export TMPDIR={shlex.quote(str(jobtmp))}\n"
            f'eval "$({shlex.quote(cli)} serve --per-job --daemon --backend host '
            '--emulated-devices 2 --cpu-workers 1)"\n'
            'echo "pool=$GPUFLOW_POOL job=$SLURM_JOB_ID"\n'
            f"cd {shlex.quote(str(workdir))}\n"
            f"{shlex.join(snakemake_command('--cores', '2'))}\n")
        out = tmp_path / "job.out"
        # sbatch hands the job this environment: the checkout's packages, no outer pool.
        env = snakemake_env()
        for name in set(os.environ) | set(env):
            if name not in env:
                monkeypatch.delenv(name)
            elif os.environ.get(name) != env[name]:
                monkeypatch.setenv(name, env[name])
        completed, how = run_job(script, "-N1", "--gres=gpu:2", "-c2", "-o", str(out))
        log = out.read_text() if out.exists() else ""
        assert completed, how + "\n" + log
    pool, job = (word.split("=", 1)[1] for word in
                 next(line for line in log.splitlines() if line.startswith("pool=")).split())
    assert pool == f"unix://{jobtmp}/gpuflow-job-{job}/gpuflow.sock"
    assert f"leasing from the service at {pool}" in log, log
    check = subprocess.run([sys.executable, str(LEDGER_CHECK), str(workdir / "ledger"),
                            "--devices", "2"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert len((workdir / "ledger").read_text().splitlines()) == GPU_JOBS
    # The pool stops once the job's script has ended: a moment after sbatch --wait returns (60 s:
    # a guard against a hang, however long a loaded machine makes that moment).
    deadline = time.monotonic() + 60
    while list(jobtmp.glob("gpuflow-job-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(jobtmp.glob("gpuflow-job-*")), "the job's pool outlived the job"
