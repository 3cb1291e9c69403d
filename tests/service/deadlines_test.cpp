// The service's deadlines (service/deadlines.hpp): what is due is acted on once, kind by kind,
// in client then request order, and a client that left has none.
#include "service/deadlines.hpp"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace gf::service {
namespace {

using Fired = std::vector<std::tuple<Deadline, ClientId, uint64_t>>;

// Deadlines whose every kind records what it ended.
struct Recorded {
  Recorded() {
    for (Deadline kind : kDeadlineKinds) {
      d.on_due(kind, [this, kind](ClientId c, uint64_t r) { fired.emplace_back(kind, c, r); });
    }
  }
  Fired expire(double now) {
    fired.clear();
    d.expire(now);
    return fired;
  }
  Deadlines d;
  Fired fired;
};

TEST(Deadlines, DueOnesAreActedOnOnceKindByKindInClientThenRequestOrder) {
  Recorded r;
  r.d.set(Deadline::kLeaseRequest, 2, 7, 1.0);
  r.d.set(Deadline::kLeaseRequest, 1, 9, 1.0);
  r.d.set(Deadline::kLeaseRequest, 1, 3, 0.5);
  r.d.set(Deadline::kLeaseRequest, 1, 4, 2.0);
  r.d.set(Deadline::kRelayStart, 3, 0, 0.9);
  r.d.set(Deadline::kHello, 5, 0, 0.1);
  EXPECT_EQ(r.expire(0.05), Fired{});
  EXPECT_EQ(r.expire(1.0), (Fired{{Deadline::kHello, 5, 0},
                                  {Deadline::kRelayStart, 3, 0},
                                  {Deadline::kLeaseRequest, 1, 3},
                                  {Deadline::kLeaseRequest, 1, 9},
                                  {Deadline::kLeaseRequest, 2, 7}}));
  EXPECT_EQ(r.expire(1.0), Fired{});
  EXPECT_EQ(r.expire(5.0), (Fired{{Deadline::kLeaseRequest, 1, 4}}));
}

TEST(Deadlines, SettingAgainMovesAndClearingOrLeavingRemoves) {
  Recorded r;
  r.d.set(Deadline::kRelayStart, 3, 0, 1.0);
  r.d.set(Deadline::kRelayStart, 3, 0, 10.0);
  EXPECT_EQ(r.expire(5.0), Fired{});
  r.d.clear(Deadline::kRelayStart, 3);
  EXPECT_EQ(r.expire(20.0), Fired{});

  r.d.set(Deadline::kHello, 4, 0, 1.0);
  r.d.set(Deadline::kLeaseRequest, 4, 1, 1.0);
  r.d.set(Deadline::kLeaseRequest, 5, 1, 1.0);
  r.d.forget(4);
  EXPECT_EQ(r.expire(2.0), (Fired{{Deadline::kLeaseRequest, 5, 1}}));
}

}  // namespace
}  // namespace gf::service
