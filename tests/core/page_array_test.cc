#include "gridfeed/core/page_array.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "gridfeed/core/memory_usage.h"

namespace gridfeed {
namespace {

TEST(PageArray, HoldsWhatIsWrittenAndCopiesDeeply) {
  PageArray<int32_t> a(1000);
  ASSERT_EQ(a.size(), 1000u);
  std::iota(a.begin(), a.end(), -3);
  PageArray<int32_t> b = a;
  EXPECT_TRUE(a == b);
  EXPECT_NE(a.data(), b.data());
  b[999] = 7;
  EXPECT_FALSE(a == b);
  EXPECT_EQ(a[999], 996);
  const std::span<const int32_t> view = a;
  EXPECT_EQ(view.size(), 1000u);
  EXPECT_EQ(view[0], -3);
}

TEST(PageArray, MovesAndEmpty) {
  PageArray<int64_t> a(10);
  a[3] = 42;
  const int64_t* where = a.data();
  PageArray<int64_t> b = std::move(a);
  EXPECT_EQ(b.data(), where);
  EXPECT_EQ(b[3], 42);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  PageArray<int64_t> none(0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_TRUE(none == PageArray<int64_t>());
  none.Populate();  // no mapping: nothing to do
}

TEST(PageArray, LargeArraysStartOnHugePageBoundaries) {
  PageArray<uint32_t> a((size_t{6} << 20) + 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % (size_t{2} << 20), 0u);
  a[a.size() - 1] = 9;  // the last entry is inside the mapping
  EXPECT_EQ(a[a.size() - 1], 9u);
}

TEST(PageArray, PopulateMakesThePagesResident) {
  ASSERT_TRUE(ResetPeakResident()) << "/proc/self/clear_refs (Linux 4.0+) is needed";
  const int64_t before = PeakResidentBytes();
  ASSERT_GT(before, 0);
  PageArray<std::byte> a(size_t{64} << 20);
  EXPECT_LT(PeakResidentBytes() - before, int64_t{16} << 20);  // mapped, not yet resident
  a.Populate();
  EXPECT_GE(PeakResidentBytes() - before, int64_t{60} << 20);
  EXPECT_GE(ResidentBytes(), int64_t{60} << 20);
}

TEST(PageArray, ReleaseFrontGivesBackWholePagesOnly) {
  PageArray<uint32_t> a(size_t{16} << 20);  // 64 MiB
  std::fill(a.begin(), a.end(), 5u);
  const int64_t full = ResidentBytes();
  a.ReleaseFront(a.size() / 2 + 1);  // half the pages, and one entry of the next
  EXPECT_GE(full - ResidentBytes(), int64_t{30} << 20);
  EXPECT_EQ(a[0], 0u);
  EXPECT_EQ(a[a.size() / 2 - 1], 0u);
  EXPECT_EQ(a[a.size() / 2], 5u);  // its page also holds entries not released
  EXPECT_EQ(a[a.size() - 1], 5u);
}

}  // namespace
}  // namespace gridfeed
