// large_array_test.cpp: the allocator of large graphs' per-task arrays. What the scheduler relies
// on: large arrays come back writable end to end and aligned to a huge page (their contents are
// unspecified: vector construction writes them anyway); one given back is reused by the next
// array of its size, within a bound on what is kept; small ones take the plain allocator; vectors
// using it behave as any vector through growth and moves.
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
  std::memset(p, 0xab, n * sizeof(Wide));
  EXPECT_EQ(p[n - 1].c, 0xababababababababull);
  alloc.deallocate(p, n);
}

TEST(LargeArray, AGivenBackArrayIsReusedByTheNextOfItsSize) {
  if (!gf::large_array::enabled()) GTEST_SKIP() << "GPUFLOW_HUGE_PAGES=0: large arrays are plain";
  gf::LargeArrayAllocator<uint64_t> alloc;
  const size_t n = 3 * gf::large_array::kThreshold / sizeof(uint64_t) + 7;
  uint64_t *first = alloc.allocate(n);
  first[n - 1] = 42;  // touched, as a run's arrays are
  alloc.deallocate(first, n);
  // Another size within the same huge pages reuses it too; a different length does not.
  uint64_t *other = alloc.allocate(n + gf::large_array::kHugePage / sizeof(uint64_t) * 2);
  EXPECT_NE(other, first);
  uint64_t *again = alloc.allocate(n - 5);
  EXPECT_EQ(again, first);
  again[0] = again[n - 6] = 7;  // writable end to end
  alloc.deallocate(again, n - 5);
  alloc.deallocate(other, n + gf::large_array::kHugePage / sizeof(uint64_t) * 2);
}

TEST(LargeArray, WhatIsKeptForReuseStaysWithinItsBounds) {
  if (!gf::large_array::enabled()) GTEST_SKIP() << "GPUFLOW_HUGE_PAGES=0: large arrays are plain";
  gf::LargeArrayAllocator<char> alloc;
  // More arrays than are kept, of many sizes: the oldest are unmapped.
  std::vector<std::pair<char *, size_t>> arrays;
  for (size_t i = 0; i < 2 * gf::large_array::kKeptMappings; ++i) {
    const size_t n = gf::large_array::kThreshold + i * gf::large_array::kHugePage;
    arrays.emplace_back(alloc.allocate(n), n);
  }
  for (auto [p, n] : arrays) alloc.deallocate(p, n);
  EXPECT_LE(gf::large_array::kept_count(), gf::large_array::kKeptMappings);
  EXPECT_LE(gf::large_array::kept_bytes(), gf::large_array::kKeptBytes);
  EXPECT_GT(gf::large_array::kept_count(), 0u);
  // One larger than the bound is never kept.
  const size_t huge = gf::large_array::kKeptBytes + gf::large_array::kHugePage;
  char *big = alloc.allocate(huge);
  ASSERT_NE(big, nullptr);
  big[huge - 1] = 1;  // touches a single page of it
  const size_t kept = gf::large_array::kept_bytes();
  alloc.deallocate(big, huge);
  EXPECT_EQ(gf::large_array::kept_bytes(), kept);
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
