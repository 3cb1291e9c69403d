#include "capi/handles.hpp"

#include <gtest/gtest.h>

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

}  // namespace gf::capi
