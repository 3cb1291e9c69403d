#include "scheduler/replica_set.hpp"

#include <gtest/gtest.h>

namespace gf {
namespace {

int bytes[4];

TEST(ReplicaSet, FreeingDropsOwnedCopiesAndKeepsTheCallersBytes) {
  // A task's output, on host and on two devices (three copies: past the one inline).
  ReplicaSet output;
  output.push_back(Replica{kHostSpace, true, &bytes[0]});
  output.push_back(Replica{1, true, &bytes[1]});
  output.push_back(Replica{2, true, &bytes[2]});
  ASSERT_EQ(output.size(), 3u);
  output.remove_owned();
  EXPECT_TRUE(output.empty());
  output.push_back(Replica{1, true, &bytes[1]});  // usable again once emptied
  EXPECT_EQ(output.front().ptr, &bytes[1]);

  // A host input: the caller's bytes stay, its device copies go.
  for (int devices : {1, 2}) {
    ReplicaSet input;
    input.push_back(Replica{1, true, &bytes[1]});
    input.push_back(Replica{kHostSpace, false, &bytes[0]});
    if (devices == 2) input.push_back(Replica{2, true, &bytes[2]});
    input.remove_owned();
    ASSERT_EQ(input.size(), 1u) << devices << " device copies";
    EXPECT_EQ(input.front().ptr, &bytes[0]);
    EXPECT_FALSE(input.front().owned);
    EXPECT_EQ(input.find(1), nullptr);
  }
}

}  // namespace
}  // namespace gf
