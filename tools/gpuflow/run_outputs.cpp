#include "run_outputs.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/bytes_text.hpp"

namespace gpuflow_cli {

namespace {

bool printable_utf8(const std::vector<unsigned char> &b) {
  for (size_t i = 0; i < b.size();) {
    unsigned char c = b[i];
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t n = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 9;
    if (n == 9 || c < 0xC2 || c > 0xF4 || i + n >= b.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

// The rest of the line after "  NAME: N bytes": what the bytes read as.
void print_value(const std::vector<unsigned char> &bytes) {
  if (bytes.size() == 8) {
    int64_t as_int;
    double as_double;
    std::memcpy(&as_int, bytes.data(), 8);
    std::memcpy(&as_double, bytes.data(), 8);
    std::printf(", int64 %" PRId64 ", double %.17g", as_int, as_double);
  }
  if (printable_utf8(bytes)) {
    std::string text;
    for (unsigned char c : bytes) {
      text += c == '\n'   ? std::string("\\n")
              : c == '\t' ? std::string("\\t")
              : c == '\r' ? std::string("\\r")
              : c == '"'  ? std::string("\\\"")
              : c == '\\' ? std::string("\\\\")
                          : std::string(1, static_cast<char>(c));
    }
    std::printf(", text \"%s\"\n", text.c_str());
  } else {
    std::printf(", hex ");
    for (unsigned char c : bytes) std::printf("%02x", c);
    std::printf("\n");
  }
}

}  // namespace

void show_outputs(gf_run *run, gf_graph *graph, const GraphNames &names) {
  std::printf("outputs:\n");
  int shown = 0;
  for (uint64_t i = 0; i < names.data.size(); ++i) {
    gf_data d;
    if (gf_graph_data_at(&d, graph, i) != GF_OK || names.data[i].literal) continue;
    const char *name = names.data[i].name.c_str();
    uint64_t size = 0;
    gf_status s = gf_run_fetch(&size, run, d, nullptr, 0);
    if (s != GF_OK) {
      void *value = nullptr;
      if (s == GF_ERR_INVALID_ARGUMENT && gf_run_value(&value, run, d) == GF_OK) {
        std::printf("  %s: an opaque value\n", name);
        ++shown;
      }
      continue;  // not kept, or not produced
    }
    ++shown;
    std::printf("  %s: %" PRIu64 " byte%s", name, size, size == 1 ? "" : "s");
    constexpr uint64_t kSmall = 256;
    if (size == 0 || size > kSmall) {
      if (size > kSmall) std::printf(" (%s)", gf::bytes_text(static_cast<double>(size)).c_str());
      std::printf("\n");
      continue;
    }
    std::vector<unsigned char> bytes(size);
    if (gf_run_fetch(&size, run, d, bytes.data(), bytes.size()) != GF_OK) {
      std::printf(" (cannot fetch: %s)\n", gf_last_error());
      continue;
    }
    print_value(bytes);
  }
  if (shown == 0) std::printf("  (none kept)\n");
}

}  // namespace gpuflow_cli
