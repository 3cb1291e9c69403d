// The usage texts `gpuflow --help` and `gpuflow serve --help` print (and every usage error
// after its message): hand-written, as README.md and docs/ quote them.
#pragma once

#include <CLI/CLI.hpp>

namespace gpuflow_cli {

// The text for the subcommand `app` was parsing (the graph commands' text when none).
const char *usage_for(const CLI::App &app);

}  // namespace gpuflow_cli
