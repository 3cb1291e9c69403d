// `gpuflow lease [request] -- COMMAND [ARGS...]`: waits its turn for devices on the node's
// service, runs COMMAND as a job the lease owns (job_tree.hpp) with the devices named in its
// environment, and releases them once no process of the job is left.
#pragma once

#include <CLI/CLI.hpp>

namespace gpuflow_cli {

// Adds the subcommand; when it is chosen, running it sets `exit_code` (COMMAND's status, or 2
// when no lease was granted or COMMAND could not run).
void add_lease_command(CLI::App &app, int &exit_code);

}  // namespace gpuflow_cli
