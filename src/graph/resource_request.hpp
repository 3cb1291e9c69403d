// Resource requests by name, as a graph states them, deduplicated so that the many tasks sharing
// one request share one entry (checked against a pool once per entry, not once per task).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/fixed_point.hpp"

namespace gf {

using RequestId = uint32_t;
inline constexpr RequestId kEmptyRequest = 0;

// Sorted by name, no duplicates, no zero amounts.
using NamedRequest = std::vector<std::pair<std::string, FixedPoint>>;

class RequestTable {
 public:
  RequestTable() { entries_.emplace_back(); }
  RequestId intern(NamedRequest request);
  const NamedRequest &get(RequestId id) const { return entries_[id]; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<NamedRequest> entries_;
  std::map<NamedRequest, RequestId> index_;
};

}  // namespace gf
