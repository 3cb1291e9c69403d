#include "service/deadlines.hpp"

namespace gf::service {

void Deadlines::set(Deadline kind, ClientId client, uint64_t request, double when) {
  at_[{kind, client, request}] = when;
}

void Deadlines::clear(Deadline kind, ClientId client, uint64_t request) {
  at_.erase({kind, client, request});
}

void Deadlines::expire(double now) {
  for (Deadline kind : kDeadlineKinds) {
    const Action &action = actions_.at(static_cast<size_t>(kind));
    for (const Due &due : take_due(kind, now)) {
      if (action) action(due.client, due.request);
    }
  }
}

void Deadlines::forget(ClientId client) {
  for (Deadline kind : kDeadlineKinds) {
    at_.erase(at_.lower_bound({kind, client, 0}), at_.lower_bound({kind, client + 1, 0}));
  }
}

std::vector<Deadlines::Due> Deadlines::take_due(Deadline kind, double now) {
  std::vector<Due> due;
  auto it = at_.lower_bound({kind, 0, 0});
  while (it != at_.end() && std::get<0>(it->first) == kind) {
    if (it->second <= now) {
      due.push_back({std::get<1>(it->first), std::get<2>(it->first)});
      it = at_.erase(it);
    } else {
      ++it;
    }
  }
  return due;
}

}  // namespace gf::service
