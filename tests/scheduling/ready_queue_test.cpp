#include "scheduler/ready_queue.hpp"

#include <gtest/gtest.h>

namespace gf {

TEST(ReadyQueue, PriorityThenOlderRunThenRank) {
  ReadyQueue q;
  gf::RunState *r1 = nullptr;
  q.push({0, 5, 2, r1, {}, 0});    // low priority, newer run
  q.push({0, 1, 2, r1, {}, 1});    // same run, better rank
  q.push({0, 9, 1, r1, {}, 2});    // older run wins over rank
  q.push({10, 99, 9, r1, {}, 3});  // highest priority first, whatever else
  EXPECT_EQ(q.pop().task, 3u);
  EXPECT_EQ(q.pop().task, 2u);
  EXPECT_EQ(q.pop().task, 1u);
  EXPECT_EQ(q.pop().task, 0u);
  EXPECT_TRUE(q.empty());
}

TEST(ReadyQueue, RemoveRunKeepsOrderOfTheRest) {
  ReadyQueue q;
  auto *a = reinterpret_cast<gf::RunState *>(0x10);
  auto *b = reinterpret_cast<gf::RunState *>(0x20);
  for (uint32_t i = 0; i < 10; ++i) q.push({static_cast<int32_t>(i), i, 1, i % 2 ? a : b, {}, i});
  q.remove_run(a);
  ASSERT_EQ(q.size(), 5u);
  uint32_t expected[] = {8, 6, 4, 2, 0};
  for (uint32_t t : expected) EXPECT_EQ(q.pop().task, t);
}

}  // namespace gf
