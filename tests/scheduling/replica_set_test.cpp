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

TEST(ReplicaSet, CopiesComeAndGoInAnyOrderPastTheOneInline) {
  // Data copied to a device and back, spilled, dropped: each step leaves exactly the copies that
  // should be there, found by space, whichever of them was first.
  ReplicaSet data;
  data.push_back(Replica{kHostSpace, true, &bytes[0]});
  data.push_back(Replica{1, true, &bytes[1]});  // moved to device 1
  ASSERT_EQ(data.size(), 2u);
  ASSERT_NE(data.find(1), nullptr);
  EXPECT_EQ(data.find(1)->ptr, &bytes[1]);
  EXPECT_EQ(data.find(kHostSpace)->ptr, &bytes[0]);
  data.remove(kHostSpace);  // the host copy goes: only the device's is left
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data.front().space, 1u);
  EXPECT_EQ(data.find(kHostSpace), nullptr);
  data.push_back(Replica{2, true, &bytes[2]});
  data.push_back(Replica{kHostSpace, true, &bytes[3]});  // spilled back to host
  ASSERT_EQ(data.size(), 3u);
  size_t seen = 0;
  for (const Replica &r : data)
    seen += r.ptr == &bytes[1] || r.ptr == &bytes[2] || r.ptr == &bytes[3];
  EXPECT_EQ(seen, 3u);
  data.remove(1);
  data.remove(2);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data.front().ptr, &bytes[3]);
  data.remove(kHostSpace);
  EXPECT_TRUE(data.empty());
  EXPECT_EQ(data.begin(), data.end());
}

}  // namespace
}  // namespace gf
