#include "capi/handles.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace gf::capi {

TEST(HandleTable, StaleAndForeignHandlesAreNotFound) {
  HandleTable<int, 5> table;
  HandleTable<int, 6> other;
  uint64_t h = table.insert(std::make_shared<int>(42));
  ASSERT_NE(table.find(h), nullptr);
  EXPECT_EQ(*table.find(h), 42);
  EXPECT_EQ(other.find(h), nullptr);  // a handle of another type
  EXPECT_EQ(table.find(0), nullptr);
  EXPECT_EQ(table.find(h ^ (uint64_t{1} << 40)), nullptr);  // forged generation
  auto removed = table.remove(h);
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(table.find(h), nullptr);
  EXPECT_EQ(table.remove(h), nullptr);  // double destroy is harmless
  // The slot is reused with a new generation: the old handle still does not resolve.
  uint64_t h2 = table.insert(std::make_shared<int>(7));
  EXPECT_NE(h2, h);
  EXPECT_EQ(table.find(h), nullptr);
  EXPECT_EQ(*table.find(h2), 7);
}

// Lookups take no lock: one thread finds a live handle over and over while another inserts and
// removes thousands of others (growing the table into new segments), and every lookup sees the
// live object, every removed handle nothing.
TEST(HandleTable, LookupsWhileOtherHandlesComeAndGo) {
  HandleTable<int, 7> table;
  const uint64_t live = table.insert(std::make_shared<int>(1));
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      const int *found = table.find(live);
      if (!found || *found != 1) wrong.fetch_add(1);
    }
  });
  std::vector<uint64_t> removed;
  for (int round = 0; round < 20; ++round) {
    std::vector<uint64_t> handles;
    for (int i = 0; i < 500; ++i) handles.push_back(table.insert(std::make_shared<int>(i)));
    for (int i = 0; i < 500; ++i) {
      ASSERT_NE(table.find(handles[i]), nullptr);
      EXPECT_EQ(*table.find(handles[i]), i);
    }
    for (size_t i = 0; i < handles.size(); i += 2) {
      ASSERT_NE(table.remove(handles[i]), nullptr);
      removed.push_back(handles[i]);
    }
  }
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
  for (uint64_t h : removed) EXPECT_EQ(table.find(h), nullptr);
  EXPECT_EQ(*table.find(live), 1);
}

}  // namespace gf::capi
