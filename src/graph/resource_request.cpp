#include "graph/resource_request.hpp"

namespace gf {

RequestId RequestTable::intern(NamedRequest request) {
  if (request.empty()) return kEmptyRequest;
  auto found = index_.find(request);
  if (found != index_.end()) return found->second;
  auto id = static_cast<RequestId>(entries_.size());
  entries_.push_back(request);
  index_.emplace(std::move(request), id);
  return id;
}

}  // namespace gf
