#include "pool/data_plane_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "transport/inventory.hpp"

namespace gf {
namespace {

using Clock = std::chrono::steady_clock;

// Blob ids of the check's own blobs: far from the small ids programs count up from.
constexpr uint64_t kCheckBlob = 0x6766'646f'6374'0000ull;  // "gfdoct"

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string inventory_json() {
  const transport::Inventory inv = transport::inventory();
  std::string out = "\"ucx_version\":" + json_quoted(inv.version) +
                    ",\"ucx_library\":" + json_quoted(inv.library) +
                    ",\"cuda_aware\":" + (inv.cuda_aware ? "true" : "false") + ",\"offered\":[";
  for (size_t i = 0; i < inv.offered.size(); ++i) {
    const auto &t = inv.offered[i];
    out += std::string(i ? "," : "") + "{\"component\":" + json_quoted(t.component) +
           ",\"transport\":" + json_quoted(t.transport) + ",\"device\":" + json_quoted(t.device) +
           ",\"kind\":" + json_quoted(t.kind) + "}";
  }
  out += "],\"problems\":[";
  for (size_t i = 0; i < inv.problems.size(); ++i)
    out += std::string(i ? "," : "") + json_quoted(inv.problems[i]);
  return out + "]";
}

// Fills a blob with a pattern that differs per size and position, so a mix-up shows.
std::vector<uint8_t> pattern(size_t size) {
  std::vector<uint8_t> bytes(size);
  uint64_t x = 0x9e3779b97f4a7c15ull ^ size;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    bytes[i] = static_cast<uint8_t>(x);
  }
  return bytes;
}

// Puts and gets `size` bytes until `budget` seconds pass (once at least); the median times.
struct Timing {
  size_t size = 0;
  int repeats = 0;
  double put_s = 0, get_s = 0;
};

Timing measure(client::BlobClient &c, size_t size, double budget) {
  const std::vector<uint8_t> sent = pattern(size);
  std::vector<double> puts, gets;
  const auto begin = Clock::now();
  const uint64_t blob = kCheckBlob + size;
  do {
    auto t0 = Clock::now();
    c.put(blob, sent.data(), sent.size());
    puts.push_back(seconds_since(t0));
    t0 = Clock::now();
    const std::vector<uint8_t> back = c.get(blob);
    gets.push_back(seconds_since(t0));
    if (back != sent) {
      c.drop_blob(blob);
      fail(GF_ERR_INTERNAL, "the data plane returned different bytes for a " +
                                std::to_string(size) + "-byte blob (" +
                                std::to_string(back.size()) + " came back)");
    }
  } while (seconds_since(begin) < budget && puts.size() < 10000);
  c.drop_blob(blob);
  return Timing{size, static_cast<int>(puts.size()), median(puts), median(gets)};
}

}  // namespace

std::string data_plane_check_json(client::Connection *connection, double seconds) {
  std::string out = "{" + inventory_json();
  if (!connection) return out + "}";
  client::BlobClient &c = connection->blobs();
  c.open_data_plane();
  out += ",\"data_plane\":{\"transports\":" + json_quoted(c.data_plane_transports());
  const uint64_t cap = c.blob_cap();
  const std::vector<size_t> sizes{8, 64 << 10, 1 << 20, 16 << 20};
  const double each = std::max(0.0, seconds) / static_cast<double>(sizes.size());
  out += ",\"results\":[";
  bool first = true;
  for (size_t size : sizes) {
    if (size > cap) continue;
    const Timing t = measure(c, size, each);
    out += std::string(first ? "" : ",") + "{\"bytes\":" + std::to_string(t.size) +
           ",\"repeats\":" + std::to_string(t.repeats) + ",\"put_s\":" + json_number(t.put_s) +
           ",\"get_s\":" + json_number(t.get_s) +
           ",\"put_bytes_per_s\":" + json_number(t.put_s > 0 ? double(t.size) / t.put_s : 0) +
           ",\"get_bytes_per_s\":" + json_number(t.get_s > 0 ? double(t.size) / t.get_s : 0) + "}";
    first = false;
  }
  return out + "]}}";
}

}  // namespace gf
