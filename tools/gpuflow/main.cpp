// gpuflow — run, check and inspect graph documents, and use the node's shared pool, from the
// shell. Uses only the public C ABI. One parser (CLI11) reads every subcommand's options, each
// declared next to the code that runs it:
//
//   gpuflow info | validate | convert   graph_commands.cpp
//   gpuflow run                         run_command.cpp (and run_*.cpp)
//   gpuflow serve                       serve_command.cpp (serve_config, systemd_socket)
//   gpuflow status | trace | doctor     service_commands.cpp
//   gpuflow lease                       lease_command.cpp
//
// Exit codes: 0 success; 1 the run failed (a task failed) or was cancelled; 2 usage, graph,
// plugin, pool or service errors (nothing ran); lease: COMMAND's. The usage texts are usage.cpp.
#include <gpuflow.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "exit_codes.hpp"
#include "graph_commands.hpp"
#include "lease_command.hpp"
#include "run_command.hpp"
#include "serve_command.hpp"
#include "service_commands.hpp"
#include "usage.hpp"

using namespace gpuflow_cli;

namespace {

// The parser's complaint, in the command's words where it has no subcommand to blame.
std::string complaint(const CLI::ParseError &e, const CLI::App &app, int argc, char **argv) {
  if (!app.get_subcommands().empty()) return e.what();
  if (argc < 2) return "no command given";
  if (argv[1][0] != '-') return std::string("unknown command '") + argv[1] + "'";
  return e.what();
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"gpuflow"};
  // Repeating an option keeps its last value, as it always has; lists gather every one.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  app.add_flag_callback("--version", [] {
    std::printf("gpuflow %s\n", gf_version_string());
    throw CLI::Success();
  });
  int exit_code = kExitOk;
  add_info_command(app, exit_code);
  add_validate_command(app, exit_code);
  add_run_command(app, exit_code);
  add_convert_command(app, exit_code);
  add_serve_command(app, exit_code);
  add_lease_command(app, exit_code);
  add_client_commands(app, exit_code);
  try {
    app.parse(argc, argv);  // runs the chosen subcommand
  } catch (const CLI::CallForHelp &) {
    std::fputs(usage_for(app), stdout);
    return kExitOk;
  } catch (const CLI::Success &) {
    return kExitOk;
  } catch (const CLI::ParseError &e) {
    std::fprintf(stderr, "gpuflow: %s\n\n%s", complaint(e, app, argc, argv).c_str(),
                 usage_for(app));
    return kExitError;
  }
  return exit_code;
}
