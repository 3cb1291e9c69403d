#include "lease_command.hpp"

#include <gpuflow.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "exit_codes.hpp"
#include "job_tree.hpp"
#include "options.hpp"
#include "service_client.hpp"

extern char **environ;

namespace gpuflow_cli {

namespace {

struct LeaseOptions {
  std::string endpoint, token_file, name;
  double gpus = -1, cpus = 0, timeout_s = -1, grace_s = 10;
  uint64_t gpu_memory = 0;
  std::vector<int32_t> devices;
  std::vector<std::string> command;
};

// The job's environment: ours, with the lease's (gf_lease_environment) in place of any entries
// of those names. The MPS limits go whether or not the lease sets them: a job on whole devices
// must not inherit a share's limits from the environment it was started in.
std::vector<std::string> job_environment(gf_lease *lease) {
  const char *lines = "";
  gf_lease_environment(&lines, lease);
  std::vector<std::string> leased,
      replaced{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="};
  for (const char *line = lines; *line;) {
    const char *end = std::strchr(line, '\n');
    leased.emplace_back(line, end ? end : line + std::strlen(line));
    replaced.push_back(leased.back().substr(0, leased.back().find('=') + 1));
    line = end ? end + 1 : line + leased.back().size();
  }
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    const std::string entry = *e;
    bool keep = true;
    for (const std::string &name : replaced) keep = keep && entry.rfind(name, 0) != 0;
    if (keep) env.push_back(entry);
  }
  env.insert(env.end(), leased.begin(), leased.end());
  return env;
}

// Runs the job under the lease; COMMAND's status, or kExitError when it could not run.
int run_leased_job(const LeaseOptions &a, gf_lease *lease) {
  JobSpec job;
  job.argv = a.command;
  job.env = job_environment(lease);
  job.grace_s = a.grace_s;
  job.started = [&](pid_t process_group) {
    // From here the lease owns the job, even should this process be killed.
    if (gf_lease_bind_process_group(lease, process_group) != GF_OK) {
      std::fprintf(stderr,
                   "gpuflow: warning: the lease is not bound to the job (%s): if this process is "
                   "killed, the job runs on unleased\n",
                   gf_last_error());
    }
  };
  std::string error;
  const int exit_code = run_job(job, error);
  if (exit_code >= 0) return exit_code;
  std::fprintf(stderr, "gpuflow: %s\n", error.c_str());
  return kExitError;
}

int lease(const LeaseOptions &a) {
  // Before any thread exists (the pool's start them): every thread inherits the blocked signals,
  // so they reach the job's wrapper only.
  take_job_signals();
  const std::string endpoint = service_endpoint(a.endpoint);
  if (endpoint.rfind("tcp://", 0) == 0 || endpoint.rfind("tcp+insecure://", 0) == 0) {
    std::fprintf(stderr,
                 "gpuflow: lease runs COMMAND here, but %s is a service on another host, whose "
                 "devices are not here: run a graph of commands there instead (gpuflow run "
                 "--pool %s GRAPH)\n",
                 endpoint.c_str(), endpoint.c_str());
    return kExitError;
  }
  gf_pool *pool = connect_to_service(a.endpoint, a.token_file);
  if (!pool) return kExitError;
  gf_lease_request request = GF_LEASE_REQUEST_INIT;
  request.gpus = a.gpus < 0 ? (a.cpus > 0 ? 0 : 1) : a.gpus;
  request.gpu_memory = a.gpu_memory;
  request.cpus = a.cpus;
  request.devices = a.devices.empty() ? nullptr : a.devices.data();
  request.device_count = static_cast<uint32_t>(a.devices.size());
  const std::string name = a.name.empty() ? a.command[0] : a.name;
  request.name = name.c_str();
  gf_lease *lease = nullptr;
  const int64_t timeout_ms = a.timeout_s < 0 ? -1 : static_cast<int64_t>(a.timeout_s * 1000);
  if (gf_lease_acquire(&lease, pool, &request, timeout_ms) != GF_OK) {
    const int rc = library_error("no lease");
    gf_pool_destroy(pool);
    return rc;
  }
  const int exit_code = run_leased_job(a, lease);
  if (gf_lease_release(lease) != GF_OK) {
    std::fprintf(stderr, "gpuflow: releasing the lease: %s\n", gf_last_error());
  }
  gf_pool_destroy(pool);
  return exit_code;
}

}  // namespace

void add_lease_command(CLI::App &app, int &exit_code) {
  auto o = std::make_shared<LeaseOptions>();
  CLI::App *command = app.add_subcommand("lease");
  add_service_options(*command, o->endpoint, o->token_file);
  command->add_option("--gpus", o->gpus)->check(kNonNegative);
  command->add_option("--gpu-memory", o->gpu_memory)->transform(kSize);
  command->add_option("--cpus", o->cpus)->check(kNonNegative);
  command->add_option("--device", o->devices)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(whole_number(0, 1000000));
  command->add_option("--timeout", o->timeout_s)->check(kNonNegative);
  command->add_option("--name", o->name);
  command->add_option("--grace", o->grace_s)->check(kNonNegative);
  command->add_option("COMMAND", o->command, "-- COMMAND [ARGS...]")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->callback([o, &exit_code] { exit_code = lease(*o); });
}

}  // namespace gpuflow_cli
