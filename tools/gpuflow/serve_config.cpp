#include "serve_config.hpp"

#include <toml++/toml.h>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "core/regular_file.hpp"

namespace gpuflow_cli {

namespace {

// Far above any real configuration: a file this large is not one.
constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// What a key's value may be, before the flag's own rule checks it.
enum class Kind { kText, kNumber, kWholeNumbers, kTexts, kWeights, kSwitch };

struct Key {
  const char *table, *name, *flag;
  Kind kind;
};

// Every key the file may hold, by table; the flag each stands for (gpuflow serve --help).
constexpr Key kKeys[] = {
    {"pool", "backend", "--backend", Kind::kText},
    {"pool", "devices", "--devices", Kind::kWholeNumbers},
    {"pool", "cpu_workers", "--cpu-workers", Kind::kNumber},
    {"pool", "emulated_devices", "--emulated-devices", Kind::kNumber},
    {"pool", "emulated_device_memory", "--emulated-device-memory", Kind::kText},
    {"service", "socket", "--socket", Kind::kText},
    {"service", "group", "--group", Kind::kText},
    {"service", "dashboard", "--dashboard", Kind::kText},
    {"service", "listen", "--listen", Kind::kText},
    {"service", "token_file", "--token-file", Kind::kText},
    {"service", "tls_cert", "--tls-cert", Kind::kText},
    {"service", "tls_key", "--tls-key", Kind::kText},
    {"service", "tls_client_ca", "--tls-client-ca", Kind::kText},
    {"service", "insecure_listen", "--insecure-listen", Kind::kSwitch},
    {"service", "trusted_data_devices", "--trusted-data-device", Kind::kTexts},
    {"service", "plugins", "--plugin", Kind::kTexts},
    {"service", "job_kill_grace", "--job-kill-grace", Kind::kNumber},
    {"service", "cgroup_root", "--cgroup-root", Kind::kText},
    {"policy", "usage_half_life", "--usage-half-life", Kind::kNumber},
    {"policy", "client_gpu_cap", "--client-gpu-cap", Kind::kNumber},
    {"policy", "user_gpu_cap", "--user-gpu-cap", Kind::kNumber},
    {"policy", "user_weights", "--user-weights", Kind::kWeights},
};

const char *kind_words(Kind kind) {
  switch (kind) {
    case Kind::kText:
      return "a string";
    case Kind::kNumber:
      return "a number";
    case Kind::kWholeNumbers:
      return "a list of whole numbers, e.g. [0, 1]";
    case Kind::kTexts:
      return "a list of strings";
    case Kind::kWeights:
      return "a table of user = weight, e.g. { alice = 2 }";
    case Kind::kSwitch:
      return "true or false";
  }
  return "";
}

std::string number_text(const toml::node &value) {
  if (auto i = value.value_exact<int64_t>()) return std::to_string(*i);
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", *value.value_exact<double>());
  return text;
}

bool is_number(const toml::node &value) {
  return value.is_integer() || value.is_floating_point();
}

// The value as the flag's arguments; false when it is not of `kind`.
bool arguments(const Key &key, const toml::node &value, std::vector<std::string> &args) {
  switch (key.kind) {
    case Kind::kText:
      if (!value.is_string()) return false;
      args = {key.flag, *value.value_exact<std::string>()};
      return true;
    case Kind::kNumber:
      if (!is_number(value)) return false;
      args = {key.flag, number_text(value)};
      return true;
    case Kind::kWholeNumbers: {
      const toml::array *list = value.as_array();
      if (!list) return false;
      std::string joined;
      for (const toml::node &item : *list) {
        if (!item.is_integer()) return false;
        joined += (joined.empty() ? "" : ",") + number_text(item);
      }
      args = {key.flag, joined};
      return true;
    }
    case Kind::kTexts: {
      const toml::array *list = value.as_array();
      if (!list) return false;
      for (const toml::node &item : *list) {
        if (!item.is_string()) return false;
        args.push_back(key.flag);
        args.push_back(*item.value_exact<std::string>());
      }
      return true;
    }
    case Kind::kSwitch:
      if (!value.is_boolean()) return false;
      if (*value.value_exact<bool>()) args = {key.flag};
      return true;
    case Kind::kWeights: {
      const toml::table *weights = value.as_table();
      if (!weights) return false;
      std::string joined;
      for (const auto &[user, weight] : *weights) {
        if (!is_number(weight)) return false;
        joined += (joined.empty() ? "" : ",") + std::string(user.str()) + "=" + number_text(weight);
      }
      args = {key.flag, joined};
      return true;
    }
  }
  return false;
}

std::string line_of(const std::string &file, const toml::source_region &at) {
  return file + ":" + std::to_string(at.begin.line);
}

std::string known_keys(const std::string &table) {
  std::string out;
  for (const Key &k : kKeys) {
    if (table == k.table) out += (out.empty() ? "" : ", ") + std::string(k.name);
  }
  return out;
}

}  // namespace

std::vector<ConfigSetting> read_serve_config(const std::string &file) {
  // Never toml::parse_file: it opens whatever the path names and waits on a FIFO, and it reads a
  // directory or a device as an empty file. This is also what SIGHUP re-reads, so that a path
  // replaced by a FIFO cannot stall the service.
  const gf::core::FileText text =
      gf::core::read_regular_file(file, kMaxConfigBytes, "the configuration file");
  if (!text) throw std::runtime_error(text.error);
  toml::table root;
  try {
    root = toml::parse(text.contents, file);
  } catch (const toml::parse_error &e) {
    const auto &at = e.source().begin;
    throw std::runtime_error(file + ":" + std::to_string(at.line) +
                             ": not TOML: " + std::string(e.description()));
  }
  std::vector<ConfigSetting> settings;
  for (const auto &[table_name, table_node] : root) {
    const std::string table(table_name.str());
    const toml::table *keys = table_node.as_table();
    if (!keys || known_keys(table).empty()) {
      throw std::runtime_error(line_of(file, table_name.source()) + ": unknown " +
                               (keys ? "table [" + table + "]" : "key '" + table + "'") +
                               "; the file holds the tables [pool], [service] and [policy]");
    }
    for (const auto &[name, value] : *keys) {
      const std::string key = table + "." + std::string(name.str());
      const Key *known = nullptr;
      for (const Key &k : kKeys) {
        if (table == k.table && name.str() == k.name) known = &k;
      }
      const std::string where = line_of(file, name.source()) + ": key " + key;
      if (!known) {
        throw std::runtime_error(where + ": unknown; [" + table + "] holds " + known_keys(table));
      }
      ConfigSetting s{key, known->flag, {}, where};
      if (!arguments(*known, value, s.args)) {
        throw std::runtime_error(where + ": must be " + kind_words(known->kind));
      }
      settings.push_back(std::move(s));
    }
  }
  return settings;
}

bool is_policy_key(const std::string &key) {
  return key.rfind("policy.", 0) == 0;
}

}  // namespace gpuflow_cli
