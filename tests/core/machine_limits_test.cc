// What the machine lets this process use: memory it can still get, CPUs it may run on.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdint>
#include <string>

#include "gridfeed/core/memory_usage.h"
#include "gridfeed/core/usable_cpus.h"

namespace gridfeed {
namespace {

TEST(AvailableMemory, IsKnownAndBoundsWhatCanBeAsked) {
  const int64_t room = AvailableMemoryBytes();
  ASSERT_GT(room, 0);  // Linux: /proc/meminfo
  EXPECT_TRUE(CheckMemoryFor(1 << 20, "a megabyte", "").ok());
  EXPECT_TRUE(CheckMemoryFor(kMemoryCheckFloor + 1, "just over the floor", "").ok());
  const Status too_much =
      CheckMemoryFor(static_cast<double>(room) * 4 + 1e12, "the thing", "; ask less");
  ASSERT_FALSE(too_much.ok());
  const std::string text = too_much.ToString();
  EXPECT_NE(text.find("the thing needs"), std::string::npos) << text;
  EXPECT_NE(text.find("; ask less"), std::string::npos) << text;
}

TEST(UsableCpus, FollowsTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(UsableCpus(), static_cast<unsigned>(CPU_COUNT(&all)));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);  // as `taskset -c N` or a bound rank
  EXPECT_EQ(UsableCpus(), 1u);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(all), &all), 0);
}

}  // namespace
}  // namespace gridfeed
