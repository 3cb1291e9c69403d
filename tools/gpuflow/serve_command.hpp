// `gpuflow serve`: the node's shared pool, from flags and a configuration file, under systemd or
// by hand (serve_command.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace gpuflow_cli {

// Adds the subcommand; when chosen, it sets `exit_code` once the service has stopped.
void add_serve_command(CLI::App &app, int &exit_code);

}  // namespace gpuflow_cli
