// What a client process calls itself in its Hello (and in its connected pool's lease names):
// shown by `gpuflow status`, the service's log and its dashboard.
#pragma once

#include <string>
#include <string_view>

namespace gf::client {

// This process's name as valid UTF-8 of at most wire::kMaxHelloName bytes (see process_name_of).
std::string process_name();

// The name for a process whose /proc/self/comm reads `comm` and whose argv[0] ends in `program`
// (program_invocation_short_name). The kernel keeps only the first 15 bytes of a program's file
// name as its comm, cut mid-character for a name such as `训练任务_模型`; a program may also name
// itself (prctl PR_SET_NAME) after its role. So: comm, unless it is just the first 15 bytes of
// `program`, whose whole name is then taken; "gpuflow client" when both are empty. Whatever it
// is, it comes back as valid UTF-8 (utf8_fitted) of at most wire::kMaxHelloName bytes.
std::string process_name_of(std::string_view comm, std::string_view program);

}  // namespace gf::client
