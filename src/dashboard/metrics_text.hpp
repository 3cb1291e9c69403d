// Prometheus' text format (version 0.0.4), written by hand: families with their help and type,
// samples with escaped label values, histograms from the collector's buckets. Both dashboard
// sources (pool_source.hpp, service_source.hpp) and the dashboard's own gauges use it.
#pragma once

#include <cstdint>
#include <string>

#include "dashboard/collector.hpp"

namespace gf::dashboard {

// A number as Prometheus reads it (+Inf, -Inf and NaN spelled its way).
std::string num(double v);
std::string num(uint64_t v);
// A number for JSON: null where it is not finite.
std::string jnum(double v);
// One label: key="value", the value escaped.
std::string kv(const char *key, const std::string &value);

class Metrics {
 public:
  void family(const std::string &name, const char *type, const std::string &help);
  void sample(const std::string &name, const std::string &labels, const std::string &value);
  void histogram(const std::string &name, const std::string &labels, const Histogram &h);
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace gf::dashboard
