// An external command as a task body: what to run, and how. The graph owns one per command
// task; the task's TaskBody points at it and at run_command, so placement and workers see an
// ordinary body.
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

// The body of every command task: user_data is the task's CommandSpec.
int run_command(gf_task_ctx *ctx, void *user_data);

}  // namespace gf
