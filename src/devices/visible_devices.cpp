#include "devices/visible_devices.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace gf {
namespace {

std::string trimmed(const std::string &text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

bool is_ordinal(const std::string &entry) {
  return !entry.empty() && entry.size() < 10 &&
         entry.find_first_not_of("0123456789") == std::string::npos;
}

bool is_negative(const std::string &entry) {
  return entry.size() > 1 && entry[0] == '-' && is_ordinal(entry.substr(1));
}

bool is_uuid(const std::string &entry) {
  return entry.size() > 4 && (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0);
}

// The list as its refusals name it: the setting, or (a list not from a variable) its source.
std::string quoted_setting(const HandedDown &list) {
  return list.variable.empty() ? list.source + " list" : list.variable + "='" + list.value + "'";
}

// A comma-separated list of ordinals and UUIDs, ended (as CUDA ends it) by a negative ordinal.
std::vector<std::string> entries_of(const HandedDown &list) {
  std::vector<std::string> entries;
  std::string rest = list.value;
  while (!trimmed(rest).empty() || rest.find(',') != std::string::npos) {
    const auto comma = rest.find(',');
    const std::string entry = trimmed(rest.substr(0, comma));
    rest = comma == std::string::npos ? std::string() : rest.substr(comma + 1);
    if (is_negative(entry)) break;
    if (!is_ordinal(entry) && !is_uuid(entry)) {
      fail(GF_ERR_INVALID_ARGUMENT,
           quoted_setting(list) + ": entry '" + entry +
               "' is neither a device ordinal nor a device UUID (GPU-… or MIG-…)");
    }
    for (const std::string &earlier : entries) {
      if (earlier == entry) {
        fail(GF_ERR_INVALID_ARGUMENT, quoted_setting(list) + " names device '" + entry + "' twice");
      }
    }
    entries.push_back(entry);
  }
  return entries;
}

HandedDown from_variable(const char *variable, const char *value) {
  HandedDown list;
  list.variable = variable;
  list.value = value;
  list.source = list.variable + "=" + list.value;
  const std::string text = trimmed(value);
  if (list.variable == "NVIDIA_VISIBLE_DEVICES") {
    if (text == "all") return list;
    if (text == "none" || text == "void") {
      list.all = false;
      return list;
    }
  }
  list.all = false;
  list.entries = entries_of(list);
  return list;
}

// The index of the device `entry` names, -1 when none; refuses a prefix matching several.
int find_device(const HandedDown &list, const std::string &entry,
                const std::vector<std::string> &node_uuids) {
  if (is_ordinal(entry)) {
    const long ordinal = std::strtol(entry.c_str(), nullptr, 10);
    return ordinal < static_cast<long>(node_uuids.size()) ? static_cast<int>(ordinal) : -1;
  }
  int found = -1;
  for (size_t i = 0; i < node_uuids.size(); ++i) {
    if (node_uuids[i] == entry) return static_cast<int>(i);
    if (node_uuids[i].rfind(entry, 0) != 0) continue;
    if (found >= 0) {
      fail(GF_ERR_INVALID_ARGUMENT, quoted_setting(list) + ": '" + entry + "' is the start of " +
                                        node_uuids[static_cast<size_t>(found)] + " and of " +
                                        node_uuids[i] +
                                        "; give enough of the UUID to tell them apart");
    }
    found = static_cast<int>(i);
  }
  return found;
}

bool numbers_node_gpus(const HandedDown &list) {
  return list.variable != "CUDA_VISIBLE_DEVICES";
}

}  // namespace

HandedDown handed_down(const EnvLookup &getenv) {
  for (const char *variable :
       {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "NVIDIA_VISIBLE_DEVICES"}) {
    if (const char *value = getenv(variable)) return from_variable(variable, value);
  }
  return HandedDown{};
}

HandedDown handed_down() {
  return handed_down([](const char *variable) { return std::getenv(variable); });
}

HandedDown named_devices(std::string source, std::vector<std::string> uuids) {
  HandedDown list;
  list.all = false;
  list.entries = std::move(uuids);
  list.source = std::move(source);
  return list;
}

std::vector<int> select_devices(const HandedDown &list, const std::vector<std::string> &node_uuids,
                                const std::string &node) {
  std::vector<int> chosen;
  if (list.all) {
    for (size_t i = 0; i < node_uuids.size(); ++i) chosen.push_back(static_cast<int>(i));
    return chosen;
  }
  for (const std::string &entry : list.entries) {
    const int device = find_device(list, entry, node_uuids);
    if (device >= 0) {
      for (int earlier : chosen) {
        if (earlier == device) {
          fail(GF_ERR_INVALID_ARGUMENT, quoted_setting(list) + " names device " +
                                            node_uuids[static_cast<size_t>(device)] + " twice ('" +
                                            entry + "')");
        }
      }
      chosen.push_back(device);
      continue;
    }
    if (numbers_node_gpus(list) && is_ordinal(entry) && node_uuids.size() == list.entries.size()) {
      return select_devices(HandedDown{}, node_uuids, node);  // applied already: see the header
    }
    fail(GF_ERR_NOT_FOUND,
         quoted_setting(list) + " names device '" + entry + "', which does not exist: " + node);
  }
  return chosen;
}

}  // namespace gf
