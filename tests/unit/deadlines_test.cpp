// The service's deadlines (service/deadlines.hpp): what is due comes out once, by kind, in
// client then request order, and a client that left has none.
#include "service/deadlines.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace gf::service {
namespace {

std::vector<std::pair<ClientId, uint64_t>> due(Deadlines &d, Deadline kind, double now) {
  std::vector<std::pair<ClientId, uint64_t>> out;
  for (const Deadlines::Due &x : d.take_due(kind, now)) out.emplace_back(x.client, x.request);
  return out;
}

TEST(Deadlines, DueOnesComeOutOnceInClientThenRequestOrder) {
  Deadlines d;
  d.set(Deadline::kLeaseRequest, 2, 7, 1.0);
  d.set(Deadline::kLeaseRequest, 1, 9, 1.0);
  d.set(Deadline::kLeaseRequest, 1, 3, 0.5);
  d.set(Deadline::kLeaseRequest, 1, 4, 2.0);
  d.set(Deadline::kHello, 1, 0, 0.1);
  using Due = std::vector<std::pair<ClientId, uint64_t>>;
  EXPECT_EQ(due(d, Deadline::kLeaseRequest, 0.4), Due{});
  EXPECT_EQ(due(d, Deadline::kLeaseRequest, 1.0), (Due{{1, 3}, {1, 9}, {2, 7}}));
  EXPECT_EQ(due(d, Deadline::kLeaseRequest, 1.0), Due{});
  EXPECT_EQ(due(d, Deadline::kHello, 1.0), (Due{{1, 0}}));  // kinds are apart
  EXPECT_EQ(due(d, Deadline::kLeaseRequest, 5.0), (Due{{1, 4}}));
}

TEST(Deadlines, SettingAgainMovesAndClearingOrLeavingRemoves) {
  Deadlines d;
  using Due = std::vector<std::pair<ClientId, uint64_t>>;
  d.set(Deadline::kRelayStart, 3, 0, 1.0);
  d.set(Deadline::kRelayStart, 3, 0, 10.0);
  EXPECT_EQ(due(d, Deadline::kRelayStart, 5.0), Due{});
  d.clear(Deadline::kRelayStart, 3);
  EXPECT_EQ(due(d, Deadline::kRelayStart, 20.0), Due{});

  d.set(Deadline::kHello, 4, 0, 1.0);
  d.set(Deadline::kLeaseRequest, 4, 1, 1.0);
  d.set(Deadline::kLeaseRequest, 5, 1, 1.0);
  d.forget(4);
  EXPECT_EQ(due(d, Deadline::kHello, 2.0), Due{});
  EXPECT_EQ(due(d, Deadline::kLeaseRequest, 2.0), (Due{{5, 1}}));
}

}  // namespace
}  // namespace gf::service
