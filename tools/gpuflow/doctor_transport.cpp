#include "doctor_transport.hpp"

#include "core/bytes_text.hpp"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

namespace gpuflow_cli {
namespace {

std::string rate_text(double bytes_per_s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GB/s", bytes_per_s / 1e9);
  return text;
}

std::string time_text(double s) {
  char text[32];
  if (s < 1e-3) {
    std::snprintf(text, sizeof text, "%.0f us", s * 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.2f ms", s * 1e3);
  }
  return text;
}

// Runs the check; the parsed document, or null after printing why.
nlohmann::json run_check(gf_pool *pool, double seconds,
                         const std::function<void(bool, const std::string &)> &line,
                         const char *what) {
  gf_bytes report{};
  if (gf_data_plane_check(&report, pool, seconds) != GF_OK) {
    line(false, std::string(what) + ": " + gf_last_error());
    return nullptr;
  }
  nlohmann::json doc =
      nlohmann::json::parse(static_cast<const char *>(report.data),
                            static_cast<const char *>(report.data) + report.size, nullptr, false);
  gf_bytes_free(&report);
  if (doc.is_discarded()) line(false, std::string(what) + ": the library's report is not JSON");
  return doc.is_discarded() ? nlohmann::json(nullptr) : doc;
}

void print_inventory(const nlohmann::json &doc,
                     const std::function<void(bool, const std::string &)> &line) {
  // transport -> its devices, in UCX's order
  std::vector<std::string> order;
  std::map<std::string, std::string> devices;
  for (const auto &t : doc.value("offered", nlohmann::json::array())) {
    const std::string name = t.value("transport", "?");
    if (!devices.count(name)) order.push_back(name);
    std::string &list = devices[name];
    list += (list.empty() ? "" : ", ") + t.value("device", "?");
  }
  std::string text = "UCX " + doc.value("ucx_version", std::string("?")) + " (" +
                     doc.value("ucx_library", std::string("?")) + ") offers:";
  for (const auto &name : order) text += " " + name + " (" + devices[name] + ");";
  if (order.empty()) text += " no transport";
  line(!order.empty(), text);
  std::printf("note UCX CUDA support: %s\n",
              doc.value("cuda_aware", false)
                  ? "yes (cuda_copy/cuda_ipc): device buffers can move without a host copy"
                  : "no (this UCX build has no CUDA transports): device data is staged through "
                    "host memory");
  for (const auto &p : doc.value("problems", nlohmann::json::array()))
    std::printf("note UCX: %s\n", p.get<std::string>().c_str());
}

}  // namespace

void print_data_plane_check(gf_pool *pool, double seconds,
                            const std::function<void(bool ok, const std::string &)> &line) {
  if (!pool) {
    nlohmann::json doc = run_check(nullptr, 0, line, "UCX");
    if (!doc.is_null()) print_inventory(doc, line);
    return;
  }
  nlohmann::json doc = run_check(pool, seconds, line, "data plane to the service");
  if (doc.is_null()) return;
  print_inventory(doc, line);
  const auto &plane = doc["data_plane"];
  const std::string transports = plane.value("transports", std::string("?"));
  line(true, "data plane to the service: " + transports +
                 (transports.rfind("tcp", 0) == 0
                      ? " (to the service's relay on its host: docs/transport.md, \"Remote "
                        "clients\")"
                      : " (shared memory only: docs/transport.md, \"Trust\")"));
  for (const auto &r : plane.value("results", nlohmann::json::array())) {
    const double bytes = r.value("bytes", 0.0);
    std::string text = "data plane " + gf::bytes_text(bytes) + " blobs, content checked, " +
                       std::to_string(r.value("repeats", 0)) + " round trip(s): ";
    if (bytes <= 64) {
      text += "put " + time_text(r.value("put_s", 0.0)) + ", get " +
              time_text(r.value("get_s", 0.0)) + " (median)";
    } else {
      text += "put " + rate_text(r.value("put_bytes_per_s", 0.0)) + ", get " +
              rate_text(r.value("get_bytes_per_s", 0.0)) + " (median)";
    }
    line(true, text);
  }
}

}  // namespace gpuflow_cli
