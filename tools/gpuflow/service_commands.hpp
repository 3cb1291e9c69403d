// The node's shared pool from the shell: `status`, `trace` and `doctor` ask it (`serve` is
// serve_command.hpp, `lease` lease_command.hpp).
#pragma once

#include <CLI/CLI.hpp>

namespace gpuflow_cli {

// Add the subcommands; the one chosen sets `exit_code` when it runs.
void add_client_commands(CLI::App &app, int &exit_code);

}  // namespace gpuflow_cli
