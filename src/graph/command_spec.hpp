// An external command as a task's body, as the graph describes it: what to run, and how. Plain
// data: the graph owns one per command task and serialization reads and writes it. The executor
// (commands/) is bound to it when the graph is submitted (CommandResolver, graph/task_body.hpp),
// so the scheduler and workers see an ordinary body.
#pragma once

#include <string>
#include <vector>

#include "gpuflow.h"

namespace gf {

struct CommandSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
  std::string working_dir;       // empty: inherited
  std::string log_dir;           // empty: $GPUFLOW_LOG_DIR, else ${TMPDIR:-/tmp}/gpuflow-logs
  double timeout_s = 0;          // 0: none
};

// Copies and checks a caller's description; throws gf::Error naming `where` and the field.
CommandSpec make_command_spec(const gf_command_desc &desc, const std::string &where);
// Checks a spec built by other means (deserialization) the same way.
void check_command_spec(const CommandSpec &spec, const std::string &where);

}  // namespace gf
