// `gpuflow run GRAPH`: runs a graph document on the pool the options describe (or on a Dask
// cluster), with progress, Ctrl-C to cancel, a summary, the failures, the outputs and a trace.
#pragma once

#include <CLI/CLI.hpp>

namespace gpuflow_cli {

// Adds the subcommand; when it is chosen, running it sets `exit_code`.
void add_run_command(CLI::App &app, int &exit_code);

}  // namespace gpuflow_cli
