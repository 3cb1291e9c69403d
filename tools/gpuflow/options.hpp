// What the subcommands' options share: one rule per kind of value (whole numbers, amounts,
// seconds, sizes, backends), the pool options of the graph commands and `serve`, and the
// service client options. Every subcommand declares its options with these, so a value means
// the same and is checked the same way wherever it is given.
#pragma once

#include <gpuflow.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuflow_cli {

// A whole number from `low` to `high` (ordinals, counts).
CLI::Validator whole_number(long low, long high);
// A finite number >= 0 (an amount of GPUs or CPUs, seconds of grace, a cap).
extern const CLI::Validator kNonNegative;
// A number of seconds above 0, at most a million (intervals).
extern const CLI::Validator kPositiveSeconds;
// A size such as 512M, 10G or 1.5T (K, M, G, T: powers of 1024; KiB... and B accepted too),
// or plain bytes: replaced by the number of bytes, for an integer option.
extern const CLI::Validator kSize;

// The pool a command builds (graph commands) or serves (serve).
struct PoolOptions {
  gf_backend backend = GF_BACKEND_AUTO;
  std::vector<int32_t> devices;
  int32_t emulated_devices = 0;
  uint64_t emulated_device_memory = 0;
  int32_t cpu_workers = 0;
  std::string endpoint, token_file;  // a shared pool to run on (graph commands)
  std::vector<std::string> plugins;

  // Points into this object: keep it alive while the config is used.
  gf_pool_config config() const;
};

// --backend, --devices, --emulated-devices, --cpu-workers, and --emulated-device-memory when
// `device_memory`.
void add_device_options(CLI::App &command, PoolOptions &pool, bool device_memory);
// --plugin LIB, any number of times.
void add_plugin_option(CLI::App &command, std::vector<std::string> &plugins);
// --pool ENDPOINT and --token-file F: the service a client command talks to.
void add_service_options(CLI::App &command, std::string &endpoint, std::string &token_file);

}  // namespace gpuflow_cli
