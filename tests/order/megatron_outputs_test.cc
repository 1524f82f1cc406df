// `gridfeed tables`' path: each dataset's tables go to the sink as soon as they are built, and
// their pages go back as the sink writes them (the files then take those pages, not fresh ones).
#include "gridfeed/order/megatron/megatron_outputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "testing/paths.h"
#include "testing/synthetic_store.h"

namespace gridfeed::order {
namespace {

// Keeps a copy of each array, then says all of it is written, as a file writer would.
class CopyingSink final : public ArraySink {
 public:
  Status Put(const OutputArray& a) override {
    std::lock_guard<std::mutex> lock(mu);  // early writes come from threads of their own
    synced_at_once[a.path] = a.sync_at_once;
    ++puts[a.path];
    const auto* p = static_cast<const char*>(a.data);
    copies[a.path].assign(p, p + a.size_bytes);
    told_written[a.path] = static_cast<bool>(a.written);
    if (a.written) a.written(a.size_bytes);
    // The first whole page now reads zero: given back (an array starts on a page).
    if (a.size_bytes >= 4096) {
      released[a.path] = std::all_of(p, p + 4096, [](char c) { return c == 0; });
    }
    return Status::Ok();
  }
  std::map<std::string, std::vector<char>> copies;
  std::map<std::string, bool> told_written, released, synced_at_once;
  std::map<std::string, int> puts;
  std::mutex mu;
};

// Options of a train split of `samples` samples over all of `prefix`.
config::JobOptions TrainOnly(const std::string& prefix, int64_t seq_length, const char* samples) {
  config::JobOptions o;
  o.data.data_path = {prefix};
  o.data.split = "100,0,0";
  o.data.seq_length = seq_length;
  o.data.train_samples = samples;
  o.data.valid_samples = "0";
  o.data.test_samples = "0";
  return o;
}

TEST(MegatronTables, EachDatasetGoesToTheSinkAndItsPagesGoBackAsWritten) {
  // Many epochs: every table spans pages.
  const config::JobOptions o =
      TrainOnly(gridfeed::testing::GoldenDir() + "/corpora/corpus_u16", 64, "20000");
  auto in_memory = MegatronTables(o, nullptr);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status().ToString();
  CopyingSink sink;
  auto early = MegatronTables(o, &sink);
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  ASSERT_EQ(in_memory->arrays.size(), 3u);  // one dataset: its three tables
  EXPECT_TRUE(early->arrays.empty());       // all went to the sink
  for (const OutputArray& a : in_memory->arrays) {
    SCOPED_TRACE(a.path);
    ASSERT_EQ(sink.copies.count(a.path), 1u);
    const auto* p = static_cast<const char*>(a.data);
    EXPECT_EQ(sink.copies[a.path], std::vector<char>(p, p + a.size_bytes));
    EXPECT_TRUE(sink.told_written[a.path]);
    ASSERT_GE(a.size_bytes, 4096u);
    EXPECT_TRUE(sink.released[a.path]);
  }
}

// A dataset with a drawing thread (2^20 document-index entries and up): each table goes to the
// sink as soon as it is final, to be synced at once, while the build goes on; a document index
// the walk still reads after (several epochs) keeps its pages while it is written.
TEST(MegatronTables, LargeTablesGoToTheSinkAsEachIsFinal) {
  const std::string prefix = gridfeed::testing::ScratchDir("early_tables") + "/c";
  ASSERT_TRUE(gridfeed::testing::WriteSyntheticStore(prefix, (uint64_t{1} << 20) + 4096, 2));
  for (const char* samples : {"100000", "400000"}) {  // one epoch (of 164K samples); three
    SCOPED_TRACE(samples);
    const config::JobOptions o = TrainOnly(prefix, 16, samples);
    auto in_memory = MegatronTables(o, nullptr);
    ASSERT_TRUE(in_memory.ok()) << in_memory.status().ToString();
    CopyingSink sink;
    auto early = MegatronTables(o, &sink);
    ASSERT_TRUE(early.ok()) << early.status().ToString();
    EXPECT_TRUE(early->arrays.empty());
    ASSERT_EQ(in_memory->arrays.size(), 3u);
    const bool one_epoch = std::string(samples) == "100000";
    for (const OutputArray& a : in_memory->arrays) {
      SCOPED_TRACE(a.path);
      ASSERT_EQ(sink.copies.count(a.path), 1u);
      EXPECT_EQ(sink.puts[a.path], 1);
      const auto* p = static_cast<const char*>(a.data);
      EXPECT_TRUE(sink.copies[a.path] == std::vector<char>(p, p + a.size_bytes));
      EXPECT_TRUE(sink.synced_at_once[a.path]) << "not written early";
      const bool kept = !one_epoch && a.path.find("document_index") != std::string::npos;
      EXPECT_EQ(sink.told_written[a.path], !kept);
      ASSERT_GE(a.size_bytes, 4096u);
      EXPECT_EQ(sink.released[a.path], !kept);
    }
  }
}

}  // namespace
}  // namespace gridfeed::order
