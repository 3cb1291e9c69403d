#include "options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

namespace gpuflow_cli {

namespace {

// "" when `text` is a number (all of it) meeting `ok`, else why not.
template <typename Ok>
std::string check_number(const std::string &text, const char *wanted, Ok ok) {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno || !std::isfinite(v) || !ok(v)) {
    return std::string("wants ") + wanted + ", not '" + text + "'";
  }
  return "";
}

std::string to_bytes(std::string &text) {
  char *end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  constexpr double kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;
  static const std::map<std::string, double> kScale = {
      {"", 1},       {"B", 1},    {"K", kKiB},   {"k", kKiB}, {"KiB", kKiB}, {"M", kMiB},
      {"MiB", kMiB}, {"G", kGiB}, {"GiB", kGiB}, {"T", kTiB}, {"TiB", kTiB}};
  const auto scale = kScale.find(unit);
  if (scale == kScale.end()) return "unknown size unit in '" + text + "'";
  if (text.empty() || end == text.c_str() || !(v >= 0) || v * scale->second > 1e14) {
    return "wants a size such as 512M or 10G, not '" + text + "'";
  }
  text = std::to_string(static_cast<uint64_t>(v * scale->second));
  return "";
}

}  // namespace

CLI::Validator whole_number(long low, long high) {
  const std::string wanted =
      "a whole number from " + std::to_string(low) + " to " + std::to_string(high);
  return CLI::Validator(
      [=](std::string &text) {
        return check_number(text, wanted.c_str(), [=](double v) {
          return v == std::floor(v) && v >= static_cast<double>(low) &&
                 v <= static_cast<double>(high);
        });
      },
      "INTEGER");
}

const CLI::Validator kNonNegative(
    [](std::string &text) {
      return check_number(text, "a number >= 0", [](double v) { return v >= 0; });
    },
    "NUMBER>=0");
const CLI::Validator kPositiveSeconds(
    [](std::string &text) {
      return check_number(text, "a number of seconds above 0",
                          [](double v) { return v > 0 && v <= 1e6; });
    },
    "SECONDS");
const CLI::Validator kSize(to_bytes, "SIZE");

gf_pool_config PoolOptions::config() const {
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.backend = backend;
  c.cpu_workers = cpu_workers;
  c.emulated_devices = emulated_devices;
  c.emulated_device_memory = emulated_device_memory;
  c.endpoint = endpoint.empty() ? nullptr : endpoint.c_str();
  c.token_file = token_file.empty() ? nullptr : token_file.c_str();
  if (!devices.empty()) {
    c.devices = devices.data();
    c.device_count = static_cast<uint32_t>(devices.size());
    // The host backend emulates as many devices as were named.
    if (backend == GF_BACKEND_HOST || c.emulated_devices == 0) {
      c.emulated_devices = static_cast<int32_t>(devices.size());
    }
  }
  return c;
}

void add_device_options(CLI::App &command, PoolOptions &pool, bool device_memory) {
  static const std::map<std::string, gf_backend> kBackends = {
      {"auto", GF_BACKEND_AUTO}, {"host", GF_BACKEND_HOST}, {"cuda", GF_BACKEND_CUDA}};
  command.add_option("--backend", pool.backend)->transform(CLI::CheckedTransformer(kBackends));
  command.add_option("--devices", pool.devices)
      ->delimiter(',')
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(whole_number(0, 1000000));
  command.add_option("--emulated-devices", pool.emulated_devices)->check(whole_number(-1, 1000000));
  command.add_option("--cpu-workers", pool.cpu_workers)->check(whole_number(-1, 1000000));
  if (device_memory) {
    command.add_option("--emulated-device-memory", pool.emulated_device_memory)->transform(kSize);
  }
}

void add_plugin_option(CLI::App &command, std::vector<std::string> &plugins) {
  command.add_option("--plugin", plugins)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void add_service_options(CLI::App &command, std::string &endpoint, std::string &token_file) {
  command.add_option("--pool", endpoint);
  command.add_option("--token-file", token_file);
}

}  // namespace gpuflow_cli
