// `gpuflow serve --config FILE`: the flags of serve, in a TOML file (/etc/gpuflow/serve.toml as
// the package installs it). toml++ reads it; each key stands for one flag, and its value is
// checked by that flag's own rule, so a file and a command line accept exactly the same values.
// A flag given on the command line wins over the file. An unknown key, a value of the wrong kind
// or one the flag's rule refuses is refused naming the file, the line and the key.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpuflow_cli {

// One key of the file as the flag it stands for: `args` are what the command line would hold
// ("--cpu-workers", "4"; a list repeats its flag), `where` is "FILE:LINE: key pool.cpu_workers".
struct ConfigSetting {
  std::string key;   // "pool.cpu_workers"
  std::string flag;  // "--cpu-workers"
  std::vector<std::string> args;
  std::string where;
};

// Reads FILE, which must be a regular file of at most 1 MiB (a FIFO, a directory or a device is
// refused without waiting on it: core/regular_file.hpp); throws std::runtime_error naming the
// file (and line and key) when it cannot be read, is not TOML, holds an unknown key or a value
// of the wrong kind.
std::vector<ConfigSetting> read_serve_config(const std::string &file);

// The keys of the file's [policy] table: what SIGHUP re-reads (weights, caps, half-life).
bool is_policy_key(const std::string &key);

}  // namespace gpuflow_cli
