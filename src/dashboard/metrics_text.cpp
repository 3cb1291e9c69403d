#include "dashboard/metrics_text.hpp"

#include <cmath>
#include <cstdio>

namespace gf::dashboard {

namespace {

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string num(double v) {
  if (!std::isfinite(v)) return v > 0 ? "+Inf" : (v < 0 ? "-Inf" : "NaN");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string num(uint64_t v) {
  return std::to_string(v);
}

std::string jnum(double v) {
  return std::isfinite(v) ? num(v) : "null";
}

std::string kv(const char *key, const std::string &value) {
  return std::string(key) + "=\"" + label(value) + "\"";
}

void Metrics::family(const std::string &name, const char *type, const std::string &help) {
  out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Metrics::sample(const std::string &name, const std::string &labels, const std::string &value) {
  out_ += name;
  if (!labels.empty()) out_ += "{" + labels + "}";
  out_ += " " + value + "\n";
}

void Metrics::histogram(const std::string &name, const std::string &labels, const Histogram &h) {
  uint64_t cumulative = 0;
  const std::string sep = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += h.counts[i];
    sample(name + "_bucket", sep + "le=\"" + num(kBuckets[i]) + "\"", num(cumulative));
  }
  cumulative += h.counts.back();
  sample(name + "_bucket", sep + "le=\"+Inf\"", num(cumulative));
  sample(name + "_sum", labels, num(h.sum));
  sample(name + "_count", labels, num(cumulative));
}

}  // namespace gf::dashboard
