#include "usage.hpp"

#include <string>

namespace gpuflow_cli {

namespace {

const char *kUsage = R"(usage:
  gpuflow info     [pool options] [--plugin LIB]...
  gpuflow validate GRAPH [--plugin LIB]... [pool options]
  gpuflow run      GRAPH [--plugin LIB]... [pool options] [--trace OUT.json] [--log-dir DIR]
                   [--no-progress] [--progress-interval SECONDS] [--show-outputs] [--quiet]
                   [--in-service | --in-process]
  gpuflow run      GRAPH --dask SCHEDULER_ADDRESS [--plugin LIB]...
  gpuflow convert  GRAPH OUT (--json | --binary)
  gpuflow serve | lease | status | trace | doctor   the node's shared pool (gpuflow serve --help)

GRAPH is a graph document, JSON or binary (detected); '-' reads standard input.
pool options:
  --devices LIST         device ordinals to use, e.g. 0,1 (CUDA backend); on the host backend,
                         emulates that many devices
  --emulated-devices N   emulated devices on the host backend (-1: none)
  --cpu-workers N        CPU workers (default: one per core)
  --backend auto|host|cuda
  --pool ENDPOINT        run on the node's shared pool (default: GPUFLOW_POOL, else a private
                         pool); 'embedded' forces a private one
  --token-file F         the token of a tcp://HOST:PORT pool (default: GPUFLOW_TOKEN_FILE)
validate checks the document and, against the pool the options describe, that every request is
feasible; a graph naming kernels is checked against a pool only when --plugin provides them.
run shows a progress bar on a terminal; otherwise a progress line every --progress-interval
seconds (default 10) and at the end. --show-outputs prints the value of every kept output.
--trace writes a Chrome/Perfetto trace: tasks, copies and spills on each worker's track and, on
the node's shared pool, every lease held on the same devices meanwhile (other processes' jobs).
On the shared pool (--pool), a graph whose kernels the service loaded (gpuflow serve --plugin)
runs inside the service: its document goes there over the data plane, and so do the outputs
back. --in-service insists on that (and says why it cannot), --in-process keeps it here.
run --dask runs the graph on a Dask cluster's workers, each through its own gpuflow pool with
the plugins loaded (paths valid on every node), and prints its outputs; it needs a Python with
the gpuflow package and distributed ($GPUFLOW_PYTHON, else python3).
exit codes: 0 success, 1 the run failed or was cancelled, 2 nothing ran (usage, graph, plugin or
pool error).
)";

const char *kServiceUsage = R"usage(usage:
  gpuflow serve  [pool options] [--socket PATH] [--group NAME] [--client-gpu-cap N]
                 [--user-gpu-cap N] [--user-weights USER=W,...] [--usage-half-life SECONDS]
                 [--dashboard HOST:PORT] [--plugin LIB]... [--listen HOST:PORT --token-file F
                 (--tls-cert PEM --tls-key PEM [--tls-client-ca PEM] | --insecure-listen)
                 [--trusted-data-device DEV]...] [--job-kill-grace SECONDS]
                 [--cgroup-root DIR] [--config FILE]
  gpuflow serve  --per-job [--daemon] [pool options] [other serve options]
  gpuflow lease  [--pool ENDPOINT] [--gpus N] [--gpu-memory SIZE] [--cpus N] [--device ORDINAL]...
                 [--timeout SECONDS] [--name TEXT] [--grace SECONDS] -- COMMAND [ARGS...]
  gpuflow status [--pool ENDPOINT] [--json]
  (client commands take --token-file F for a tcp:// ENDPOINT)
  gpuflow trace  [--pool ENDPOINT] [--seconds N] [--output FILE]
  gpuflow doctor [--pool ENDPOINT] [--seconds N]

serve runs the node's shared pool until SIGTERM or Ctrl-C: it owns the devices and one ledger,
and listens on a unix socket ($XDG_RUNTIME_DIR/gpuflow.sock, else /tmp/gpuflow-$UID/gpuflow.sock;
mode 0600, or 0660 for --group). Clients find it through --pool or GPUFLOW_POOL; given neither,
they try that socket, then the node's system service (/run/gpuflow/gpuflow.sock). --dashboard
serves a live page and Prometheus metrics (/metrics) over HTTP there (e.g. 127.0.0.1:8787).
--plugin loads a kernel library: graphs naming its kernels run inside the service, for clients of
the service's own user (gpuflow run --pool ENDPOINT GRAPH). --listen also accepts clients of other
hosts over TCP (--pool tcp://HOST:PORT); they must show the token in F (created, mode 0600, when
missing; clients name their copy with --token-file or GPUFLOW_TOKEN_FILE), over TLS 1.3 with the
certificate and key of --tls-cert and --tls-key (clients check it against GPUFLOW_TLS_CA); with
--tls-client-ca a client certificate that CA signed says who the user is, instead of the token.
Plain TCP only with --insecure-listen (clients then connect to tcp+insecure://HOST:PORT). A TLS
client's data plane (UCX over TCP, not encrypted) runs only on a --trusted-data-device.
Leases whose jobs still
run when their holder is killed (or the service restarts) stay held until the jobs are gone;
such a job gets SIGTERM, and SIGKILL --job-kill-grace seconds later (default 10). With
--cgroup-root DIR (a cgroup v2 directory delegated to the service; default: its own cgroup when
systemd delegated it) each job runs in a cgroup of its own there, which none of it can leave.
--config reads these settings from a TOML file (/etc/gpuflow/serve.toml as packaged: tables
[pool], [service] and [policy], a key per flag, e.g. user_gpu_cap = 2); a flag given here wins.
SIGHUP then re-reads the file's [policy] (weights, caps, half-life) without dropping a lease.
Started by systemd (gpuflow.socket), serve takes over the socket it listens on and tells systemd
when it is ready.
--per-job serves one batch job (a Slurm allocation): it listens on
${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/gpuflow-job-$SLURM_JOB_ID/gpuflow.sock (unless --socket) and
stops on SIGTERM (scancel, the time limit) or once the job's script is gone. --daemon goes to the
background once it listens and prints GPUFLOW_POOL and GPUFLOW_SERVE_PID as shell exports, for
  eval "$(gpuflow serve --per-job --daemon)"
in an sbatch script: the job's steps (srun, gpuflow lease, Snakemake, Dask) then use it.
lease waits its turn for the devices asked for, runs COMMAND with CUDA_VISIBLE_DEVICES and
NVIDIA_VISIBLE_DEVICES (device UUIDs) and GPUFLOW_DEVICES (ordinals) set, and releases them once
no process COMMAND started is left; it exits with COMMAND's status. The lease owns the job:
COMMAND runs in a process group of its own (with the terminal's foreground), signals to lease
reach all of it, and what COMMAND leaves running when it exits gets SIGTERM, then SIGKILL after
--grace seconds (default 10; also after SIGTERM or SIGHUP to lease). If lease itself is killed,
the service keeps the devices until the job's processes are gone and ends them the same way.
--gpus takes a whole number of devices or a fraction of one (0.5); SIZE takes K, M, G, T suffixes
(powers of 1024).
status shows devices, leases and their holders, the queue and per-client usage.
trace records the leases on each device for N seconds (default 10; Ctrl-C ends it early) and
writes a Chrome/Perfetto trace (default gpuflow-trace.json): one track per device, each leased
job a slice named after the lease and its holder. `gpuflow run --trace` on the shared pool puts
its own tasks on the same device tracks.
doctor checks the service, CUDA, MPS and UCX: the transports UCX offers here, the ones the
connection to the service took, and N seconds (default 2) of put/get self-test over them.
pool options (serve): --backend auto|host|cuda, --devices LIST, --emulated-devices N,
  --emulated-device-memory SIZE, --cpu-workers N (the CPUs it leases)
exit codes: lease: COMMAND's, or 2 when no lease was granted; others: 0 ok, 2 error.
)usage";

}  // namespace

const char *usage_for(const CLI::App &app) {
  for (const CLI::App *command : app.get_subcommands()) {
    const std::string &name = command->get_name();
    if (name == "serve" || name == "lease" || name == "status" || name == "trace" ||
        name == "doctor") {
      return kServiceUsage;
    }
  }
  return kUsage;
}

}  // namespace gpuflow_cli
