// large_array_test.cpp: the allocator of large graphs' per-task arrays. What the scheduler relies
// on: large arrays come back zero-filled (vector construction writes them anyway), writable end to
// end, aligned to a huge page, and are given back exactly; small ones take the plain allocator;
// vectors using it behave as any vector through growth and moves.
#include "core/large_array.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

struct Wide {
  uint64_t a, b, c;
};

TEST(LargeArray, LargeAllocationsAreHugePageAlignedAndWritable) {
  gf::LargeArrayAllocator<Wide> alloc;
  const size_t n = (gf::large_array::kThreshold / sizeof(Wide)) + 12345;  // not a whole page
  Wide *p = alloc.allocate(n);
  ASSERT_NE(p, nullptr);
  if (gf::large_array::enabled()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % gf::large_array::kHugePage, 0u);
  }
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(p[i].a | p[i].b | p[i].c, 0u) << i;  // fresh pages
  std::memset(p, 0xab, n * sizeof(Wide));
  EXPECT_EQ(p[n - 1].c, 0xababababababababull);
  alloc.deallocate(p, n);
}

TEST(LargeArray, SmallAllocationsTakeThePlainPath) {
  gf::LargeArrayAllocator<Wide> alloc;
  Wide *p = alloc.allocate(10);
  ASSERT_NE(p, nullptr);
  p[9] = Wide{1, 2, 3};
  EXPECT_EQ(p[9].b, 2u);
  alloc.deallocate(p, 10);  // through operator delete: ASan checks the pairing
}

TEST(LargeArray, VectorsGrowAcrossTheThresholdKeepingTheirContents) {
  std::vector<uint64_t, gf::LargeArrayAllocator<uint64_t>> v;
  const size_t n = 3 * gf::large_array::kThreshold / sizeof(uint64_t);
  for (size_t i = 0; i < n; ++i) v.push_back(i * 7);
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], i * 7);
  auto moved = std::move(v);
  EXPECT_EQ(moved.size(), n);
  EXPECT_EQ(moved.back(), (n - 1) * 7);
  moved.resize(5);
  moved.shrink_to_fit();  // from a mapped array back to a plain one
  EXPECT_EQ(moved[4], 28u);
}

TEST(LargeArray, AnImpossibleSizeThrowsInsteadOfWrapping) {
  gf::LargeArrayAllocator<Wide> alloc;
  EXPECT_THROW((void)alloc.allocate(SIZE_MAX / 2), std::bad_array_new_length);
}

}  // namespace
