#include "gridfeed/audit/ledger.h"

#include <gtest/gtest.h>

#include "gridfeed/io/file_util.h"
#include "testing/paths.h"

namespace gridfeed::audit {
namespace {

LedgerRecord Rec(int64_t position) {
  LedgerRecord r;
  r.iteration = position / 4;
  r.micro_batch = position % 4;
  r.position = position;
  r.token_xxh3 = 0xabcdef0123456789ull + static_cast<uint64_t>(position);
  return r;
}

TEST(Ledger, WritesReadsAndAppends) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger");
  {
    auto w = LedgerWriter::Open(dir, 1, "00ff", "{\"seed\":1}", 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int p = 0; p < 3; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());
  }
  {
    auto w = LedgerWriter::Open(dir, 1, "00ff", "{\"seed\":1}", 3);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Rec(3)).ok());
  }
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->fingerprint, "00ff");
  EXPECT_EQ(l->canonical_config, "{\"seed\":1}");
  ASSERT_EQ(l->entries.size(), 4u);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(l->entries[p].record, Rec(p));
  // Another fingerprint may not append.
  auto other = LedgerWriter::Open(dir, 1, "1111", "{}", 4);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("fingerprint"), std::string::npos);
}

TEST(Ledger, ResumeDropsRecordsPastTheCursorAndTornLines) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_resume");
  {
    auto w = LedgerWriter::Open(dir, 0, "00ff", "{}", 0);
    ASSERT_TRUE(w.ok());
    for (int p = 0; p < 10; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());
  }
  // A crash tore the last line.
  std::string text = io::ReadFileToString(dir + "/dp0.tsv").value();
  ASSERT_TRUE(io::WriteStringToFile(dir + "/dp0.tsv", text + "2\t3\t0\t1").ok());
  {
    auto w = LedgerWriter::Open(dir, 0, "00ff", "{}", 6);  // resumed from cursor 6
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Rec(6)).ok());
  }
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->entries.size(), 7u);
  for (int p = 0; p < 7; ++p) EXPECT_EQ(l->entries[p].record.position, p);
}

TEST(Ledger, MalformedLineIsReported) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_bad");
  ASSERT_TRUE(
      io::WriteStringToFile(dir + "/dp0.tsv", "# fingerprint 00\n# config {}\n1\t2\tthree\n").ok());
  auto l = ReadLedger(dir);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(l.status().message().find("line 3"), std::string::npos);
}

}  // namespace
}  // namespace gridfeed::audit
