#include "client/process_name.hpp"

#include <errno.h>  // program_invocation_short_name (GNU)

#include <cstdio>

#include "core/utf8.hpp"
#include "wire/framing.hpp"

namespace gf::client {

namespace {

// TASK_COMM_LEN (16) less its terminating zero: the most of a name the kernel keeps as comm.
constexpr size_t kCommBytes = 15;

// All of it: a name a program gave itself may hold any byte but NUL, a newline included. The
// kernel ends the file with one newline of its own.
std::string comm_of_this_process() {
  std::string comm;
  if (FILE *f = std::fopen("/proc/self/comm", "rb")) {
    char buffer[64];
    const size_t n = std::fread(buffer, 1, sizeof buffer, f);
    std::fclose(f);
    comm.assign(buffer, n);
  }
  if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

}  // namespace

std::string process_name_of(std::string_view comm, std::string_view program) {
  std::string_view name = comm;
  if (name.empty() || (name.size() == kCommBytes && program.size() > kCommBytes &&
                       program.substr(0, kCommBytes) == name)) {
    name = program;
  }
  std::string fitted = utf8_fitted(name, wire::kMaxHelloName);
  while (!fitted.empty() && fitted.back() == ' ') fitted.pop_back();
  return fitted.empty() ? "gpuflow client" : fitted;
}

std::string process_name() {
  const char *program = program_invocation_short_name;
  return process_name_of(comm_of_this_process(), program ? program : "");
}

}  // namespace gf::client
