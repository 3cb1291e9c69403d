// The job a lease owns (`gpuflow lease -- COMMAND`): COMMAND and every process it starts, in a
// process group of their own under this process, which is their subreaper (orphans come back to
// it instead of init), so none can outlive the lease unseen (docs/service.md, "A lease owns its
// job"). Linux only.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace gpuflow_cli {

// Blocks the signals a job's wrapper handles itself (SIGINT, SIGTERM, SIGHUP, SIGCHLD) in the
// calling thread, and so in every thread it starts later, and starts the thread that receives
// the stop signals. Call first, before any other thread exists. Until run_job lets COMMAND run,
// and once no process of its job is left, a stop signal ends this process at once (status 128 +
// the signal): nothing runs under the lease then, and the service takes it back with the
// connection.
void take_job_signals();

struct JobSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;
  double grace_s = 10;  // from SIGTERM to SIGKILL, when the job must end
  // Called with the job's process group once it exists and before COMMAND runs (so the lease
  // can be bound to it); COMMAND runs once it returns.
  std::function<void(pid_t process_group)> started;
};

// Runs the job and returns COMMAND's exit status (128 + N when signal N ended it), or -1 with
// `error` set when COMMAND could not be run; returns only when no process of the job is left.
// - COMMAND gets the terminal's foreground (when this process had it), so Ctrl-C and Ctrl-Z reach
//   the whole job; this process takes it back at the end.
// - SIGINT to this process is passed to every process of the job; SIGTERM and SIGHUP too, and
//   whatever is left `grace_s` later gets SIGKILL. Each comes with a SIGCONT, so that a process
//   someone stopped acts on it now rather than at the SIGKILL.
// - A COMMAND stopped at the terminal (Ctrl-Z) stops this process too, for the shell; one
//   stopped from elsewhere (SIGSTOP, no terminal) does not: whoever stopped it continues it.
// - When COMMAND ends, what it left running (a background process, a daemon that detached
//   itself) gets SIGTERM, then SIGKILL after `grace_s`.
// - Should this process be killed, COMMAND gets SIGTERM (a parent-death signal), and the service
//   ends the rest of the group (gf_lease_bind_process_group).
int run_job(const JobSpec &spec, std::string &error);

}  // namespace gpuflow_cli
