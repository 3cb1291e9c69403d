// `gpuflow info`, `validate GRAPH` and `convert GRAPH OUT`: a pool described, a document checked,
// a document rewritten in the other form.
#pragma once

#include <CLI/CLI.hpp>

namespace gpuflow_cli {

// Add the subcommands; the one chosen sets `exit_code` when it runs.
void add_info_command(CLI::App &app, int &exit_code);
void add_validate_command(CLI::App &app, int &exit_code);
void add_convert_command(CLI::App &app, int &exit_code);

}  // namespace gpuflow_cli
