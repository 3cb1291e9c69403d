#include "lease_command.hpp"

#include <gpuflow.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/emulated_uuid.hpp"
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

std::string join(const std::vector<std::string> &items) {
  std::string out;
  for (const auto &s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// For leased emulated devices: how many devices a pool in the job must emulate for
// CUDA_VISIBLE_DEVICES to name them (their UUIDs number the node's devices), else 0.
int emulated_node_size(const std::vector<std::string> &uuids) {
  int size = 0;
  for (const std::string &uuid : uuids) {
    const int ordinal = gf::emulated_ordinal(uuid);
    if (ordinal < 0) return 0;
    size = std::max(size, ordinal + 1);
  }
  return size;
}

// The job's environment: ours, plus what names its devices (replacing any such names we had).
std::vector<std::string> job_environment(gf_lease *lease) {
  uint64_t id = 0;
  uint32_t count = 0;
  double cpus = 0;
  gf_lease_info(&id, &count, &cpus, lease);
  std::vector<std::string> uuids, ordinals, mps_memory;
  double share = 1;
  for (uint32_t i = 0; i < count; ++i) {
    gf_lease_device d = GF_LEASE_DEVICE_INIT;
    gf_lease_device_info(&d, lease, i);
    uuids.push_back(d.uuid);
    ordinals.push_back(std::to_string(d.ordinal));
    share = d.share;
    mps_memory.push_back(std::to_string(i) + "=" + std::to_string(d.memory >> 20) + "M");
  }
  const int emulated_node = emulated_node_size(uuids);
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string entry = *e;
    for (const char *replaced :
         {"CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=", "GPUFLOW_DEVICES=",
          "GPUFLOW_LEASE_ID=", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=",
          "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=", emulated_node ? "GPUFLOW_EMULATED_DEVICES=" : ""}) {
      if (*replaced && entry.rfind(replaced, 0) == 0) entry.clear();
    }
    if (!entry.empty()) env.push_back(entry);
  }
  env.push_back("CUDA_VISIBLE_DEVICES=" + join(uuids));
  env.push_back("NVIDIA_VISIBLE_DEVICES=" + (uuids.empty() ? std::string("void") : join(uuids)));
  env.push_back("GPUFLOW_DEVICES=" + join(ordinals));
  env.push_back("GPUFLOW_LEASE_ID=" + std::to_string(id));
  // A pool the job starts on emulated devices then drives exactly the leased ones, UUIDs kept.
  if (emulated_node) env.push_back("GPUFLOW_EMULATED_DEVICES=" + std::to_string(emulated_node));
  if (count == 1 && share < 1) {
    // Enforced where NVIDIA MPS runs (its clients read these); elsewhere they are only counted.
    env.push_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" +
                  std::to_string(static_cast<int>(std::ceil(share * 100))));
    env.push_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=" + join(mps_memory));
  }
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
  if (endpoint.rfind("tcp://", 0) == 0) {
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
