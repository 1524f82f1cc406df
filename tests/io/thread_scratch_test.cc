// The per-thread scratch (io/thread_scratch.h): page aligned, kept across calls on a thread
// (what saves a fresh mapping per file), one buffer per slot, its own on each thread.
#include "gridfeed/io/thread_scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace gridfeed::io {
namespace {

uintptr_t Address(std::span<std::byte> s) { return reinterpret_cast<uintptr_t>(s.data()); }

TEST(ThreadScratch, PageAlignedAndAtLeastTheSizeAsked) {
  const auto s = ThreadScratch(ScratchSlot::kIndexFeed, 12345);
  ASSERT_EQ(s.size(), 12345u);
  EXPECT_EQ(Address(s) % 4096, 0u);
  s[12344] = std::byte{7};  // writable to its end
  EXPECT_EQ(s[12344], std::byte{7});
}

TEST(ThreadScratch, KeptAcrossCallsUntilALargerOneIsAsked) {
  const auto first = ThreadScratch(ScratchSlot::kIndexDigest, size_t{1} << 20);
  first[0] = std::byte{42};
  const auto again = ThreadScratch(ScratchSlot::kIndexDigest, 4096);
  EXPECT_EQ(Address(again), Address(first));  // no new mapping for a smaller or equal ask
  EXPECT_EQ(again[0], std::byte{42});
  const auto larger = ThreadScratch(ScratchSlot::kIndexDigest, size_t{4} << 20);
  EXPECT_EQ(larger.size(), size_t{4} << 20);
}

TEST(ThreadScratch, SlotsAndThreadsHaveTheirOwnBuffers) {
  const auto a = ThreadScratch(ScratchSlot::kIndexLengths, 8192);
  const auto b = ThreadScratch(ScratchSlot::kIndexPointers, 8192);
  EXPECT_NE(Address(a), Address(b));
  uintptr_t other = 0;
  std::thread([&] { other = Address(ThreadScratch(ScratchSlot::kIndexLengths, 8192)); }).join();
  EXPECT_NE(other, Address(a));
}

TEST(ThreadScratch, TypedViewCountsElements) {
  const auto v = ThreadScratchOf<int64_t>(ScratchSlot::kTablePairs, 1000);
  ASSERT_EQ(v.size(), 1000u);
  v[999] = -1;
  EXPECT_EQ(v[999], -1);
}

}  // namespace
}  // namespace gridfeed::io
