// A pool's resource names, interned to dense ids so ledgers are arrays and requests are short
// lists of (id, amount).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/fixed_point.hpp"

namespace gf {

using ResourceId = uint32_t;

// A request in a pool's terms, sorted by id.
using PoolRequest = std::vector<std::pair<ResourceId, FixedPoint>>;

class ResourceRegistry {
 public:
  ResourceId intern(const std::string &name) {
    auto [it, inserted] = ids_.emplace(name, static_cast<ResourceId>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }
  // UINT32_MAX when no worker of the pool advertises the name.
  ResourceId find(const std::string &name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? UINT32_MAX : it->second;
  }
  const std::string &name(ResourceId id) const { return names_[id]; }
  size_t size() const { return names_.size(); }

 private:
  std::unordered_map<std::string, ResourceId> ids_;
  std::vector<std::string> names_;
};

}  // namespace gf
