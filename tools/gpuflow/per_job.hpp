// `gpuflow serve --per-job [--daemon]`: a pool for one batch job (a Slurm allocation), serving the
// job's steps. Its socket is in a directory of the job's own, found the same way on every node of
// the job, so one GPUFLOW_POOL holds for all of them; it stops when the job ends: on the SIGTERM
// Slurm sends at scancel or the end of the time limit, and when the job's script is gone (the
// leader of its process group, which a service put in the background outlives). --daemon puts it
// in the background once it listens and prints the shell lines that export its endpoint, for
// `eval "$(gpuflow serve --per-job --daemon)"` in an sbatch script.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpuflow_cli {

// Where a job's service listens: DIR/gpuflow.sock, DIR = BASE/gpuflow-job-ID, BASE the first set
// of $SLURM_TMPDIR, $TMPDIR and /tmp, ID $SLURM_JOB_ID. Throws std::runtime_error saying why when
// there is no job (SLURM_JOB_ID unset) or its id cannot be part of a file name.
struct JobPlace {
  std::string job_id, dir, socket;
};
JobPlace job_place();

// Creates the job's directory (mode 0700) unless it is there already as a directory of this user
// that no one else may enter; throws std::runtime_error naming it otherwise.
void make_job_dir(const std::string &dir);

// The process whose end is the job's end, as seen from this process: the leader of its process
// group (the batch script, which Slurm starts as one), or its parent when it leads a group itself.
pid_t job_process();

// Starts a thread that waits for `pid` to end and then stops this process the way a stop signal
// would (it sends SIGTERM to itself), saying why. The thread is detached; call after
// handle_stop_signals. Throws std::runtime_error when the process cannot be watched.
void stop_when_gone(pid_t pid, const char *who);

// --daemon: forks. In the parent, waits until the child says it listens, prints `lines` it was
// sent on stdout and returns the exit code for the parent (0; or the child's, when it ended before
// it listened). In the child, returns -1 after moving its stdout onto stderr (so that `$(...)`
// does not wait for it) and stdin to /dev/null. Call before any thread starts.
int daemonize();

// In the child of daemonize: hands the parent the text to print and lets it exit.
void daemon_ready(const std::string &lines);

// `NAME='VALUE'; export NAME` with VALUE quoted for a POSIX shell.
std::string shell_export(const std::string &name, const std::string &value);

}  // namespace gpuflow_cli
