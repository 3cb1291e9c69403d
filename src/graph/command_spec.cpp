#include "graph/command_spec.hpp"

#include <cmath>

#include "core/error.hpp"

namespace gf {
namespace {

bool valid_env_entry(const std::string &entry) {
  size_t eq = entry.find('=');
  return eq != std::string::npos && eq > 0;
}

}  // namespace

void check_command_spec(const CommandSpec &spec, const std::string &where) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, where + ": the command has no program (argv[0] is empty)");
  }
  for (size_t i = 0; i < spec.env.size(); ++i) {
    if (!valid_env_entry(spec.env[i])) {
      fail(GF_ERR_INVALID_ARGUMENT, where + ": command env #" + std::to_string(i) + " '" +
                                        spec.env[i] + "' is not of the form NAME=value");
    }
  }
  if (!std::isfinite(spec.timeout_s) || spec.timeout_s < 0) {
    fail(GF_ERR_INVALID_ARGUMENT,
         where + ": command timeout_s must be finite and non-negative (0: none)");
  }
}

CommandSpec make_command_spec(const gf_command_desc &desc, const std::string &where) {
  if (desc.struct_size != sizeof(gf_command_desc)) {
    fail(GF_ERR_STRUCT_SIZE, "struct gf_command_desc of " + where + " has struct_size " +
                                 std::to_string(desc.struct_size) + "; this library expects " +
                                 std::to_string(sizeof(gf_command_desc)) +
                                 " (use GF_COMMAND_DESC_INIT or gf_command_desc_init)");
  }
  if (desc.argc == 0 || !desc.argv) {
    fail(GF_ERR_INVALID_ARGUMENT, where + ": the command needs argv with argc >= 1");
  }
  if (desc.env_count && !desc.env) {
    fail(GF_ERR_INVALID_ARGUMENT, where + ": command env_count without env (NULL pointer)");
  }
  CommandSpec spec;
  for (uint32_t i = 0; i < desc.argc; ++i) {
    if (!desc.argv[i]) {
      fail(GF_ERR_INVALID_ARGUMENT, where + ": command argv[" + std::to_string(i) + "] is NULL");
    }
    spec.argv.emplace_back(desc.argv[i]);
  }
  for (uint32_t i = 0; i < desc.env_count; ++i) {
    if (!desc.env[i]) {
      fail(GF_ERR_INVALID_ARGUMENT, where + ": command env #" + std::to_string(i) + " is NULL");
    }
    spec.env.emplace_back(desc.env[i]);
  }
  if (desc.working_dir) spec.working_dir = desc.working_dir;
  if (desc.log_dir) spec.log_dir = desc.log_dir;
  spec.timeout_s = desc.timeout_s;
  check_command_spec(spec, where);
  return spec;
}

}  // namespace gf
