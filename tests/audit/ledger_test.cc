#include "gridfeed/audit/ledger.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "gridfeed/io/file_util.h"
#include "gridfeed/order/read_schedule.h"
#include "testing/paths.h"

namespace gridfeed::audit {
namespace {

// A schedule of 1 sample per micro-batch and 4 per iteration (DP 1), starting at `consumed`.
order::ReadSchedule Schedule(int64_t consumed, int64_t dp = 1) {
  order::ScheduleOptions o;
  o.total_samples = 100;
  o.micro_batch_size = 1;
  o.dp_size = dp;
  o.global_batch_size = 4;
  o.start_consumed = consumed;
  return order::ReadSchedule::Create(o).value();
}

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
    auto w = LedgerWriter::Open(dir, 1, "00ff", "{\"seed\":1}", Schedule(0));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int p = 0; p < 3; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());
  }
  {
    auto w = LedgerWriter::Open(dir, 1, "00ff", "{\"seed\":1}", Schedule(3));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Rec(3)).ok());
  }
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->fingerprint, "00ff");
  EXPECT_EQ(l->canonical_config, "{\"seed\":1}");
  EXPECT_EQ(l->version, 2);
  ASSERT_EQ(l->segments.size(), 2u);  // one per start
  EXPECT_EQ(l->segments[1].start_consumed, 3);
  EXPECT_EQ(l->segments[1].dp_size, 1);
  ASSERT_EQ(l->entries.size(), 4u);
  EXPECT_EQ(l->entries[3].segment, 1);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(l->entries[p].record, Rec(p));
  // Another fingerprint may not append.
  auto other = LedgerWriter::Open(dir, 1, "1111", "{}", Schedule(4));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("fingerprint"), std::string::npos);
}

TEST(Ledger, ResumeDropsRecordsPastTheCursorAndTornLines) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_resume");
  {
    auto w = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(0));
    ASSERT_TRUE(w.ok());
    for (int p = 0; p < 10; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());
  }
  // A crash tore the last line.
  std::string text = io::ReadFileToString(dir + "/dp0.tsv").value();
  ASSERT_TRUE(io::WriteStringToFile(dir + "/dp0.tsv", text + "2\t3\t0\t1").ok());
  {
    auto w = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(6));  // resumed from cursor 6
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Rec(6)).ok());
  }
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->entries.size(), 7u);
  for (int p = 0; p < 7; ++p) EXPECT_EQ(l->entries[p].record.position, p);
}

TEST(Ledger, RankZeroTrimsTheFilesOfVanishedDpRanks) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_shrink");
  for (int r = 0; r < 4; ++r) {  // a run at DP 4 read iterations 0..2
    auto w = LedgerWriter::Open(dir, r, "00ff", "{}", Schedule(0, 4));
    ASSERT_TRUE(w.ok());
    for (int it = 0; it < 3; ++it) {
      LedgerRecord rec = Rec(it * 4 + r);
      rec.iteration = it;
      rec.micro_batch = 0;
      rec.dp_rank = r;
      ASSERT_TRUE((*w)->Append(rec).ok());
    }
  }
  // Restarted from the checkpoint of iteration 1 at DP 2: dp2/dp3 keep iteration 0 only.
  auto w = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(4, 2));
  ASSERT_TRUE(w.ok());
  w->reset();
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  for (const auto& e : l->entries) {
    if (e.file_dp_rank >= 2) {
      EXPECT_EQ(e.record.iteration, 0) << e.file;
    }
  }
  EXPECT_EQ(l->entries.size(), 1u + 3 + 1 + 1);  // dp0 trimmed by its writer; dp1 untouched
}

TEST(Ledger, TornHashIsReportedAsTorn) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_torn_hash");
  ASSERT_TRUE(io::WriteStringToFile(dir + "/dp0.tsv",
                                    "# fingerprint 00\n# config {}\n0\t0\t0\t0\t0\t0\t0\t0\tabcd\n")
                  .ok());
  auto l = ReadLedger(dir);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("torn"), std::string::npos) << l.status().message();
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

// Mixture configurations: schedule text A or B, the rest equal.
const char* kConfigA = "{\"mixture-schedule\":\"A\",\"seed\":1}";
const char* kConfigB = "{\"mixture-schedule\":\"B\",\"seed\":1}";

std::vector<ScheduleEntry> History(std::vector<std::pair<int64_t, std::string>> entries) {
  std::vector<ScheduleEntry> out;
  for (auto& [p, s] : entries) out.push_back({p, s});
  return out;
}

int CountLines(const std::string& text, const std::string& prefix) {
  int n = 0;
  size_t at = 0;
  while ((at = text.find("\n" + prefix, at)) != std::string::npos) {
    ++n;
    ++at;
  }
  return n;
}

TEST(Ledger, AmendedScheduleContinuesInTheSameLedger) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_amend");
  const auto a = History({{0, "A"}});
  const auto ab = History({{0, "A"}, {3, "B"}});
  {
    auto w = LedgerWriter::Open(dir, 0, "aaaa", kConfigA, Schedule(0), a);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int p = 0; p < 5; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());  // crashed after 5
  }
  EXPECT_EQ(io::ReadFileToString(dir + "/dp0.tsv")->rfind("# gridfeed ledger v2\n", 0), 0u);
  {  // resumed from the checkpoint at sample 3 with schedule B
    auto w = LedgerWriter::Open(dir, 0, "bbbb", kConfigB, Schedule(3), ab);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int p = 3; p < 6; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());
  }
  {  // resumed again at 6, still B: no second schedule line
    auto w = LedgerWriter::Open(dir, 0, "bbbb", kConfigB, Schedule(6), ab);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Append(Rec(6)).ok());
  }
  const std::string text = io::ReadFileToString(dir + "/dp0.tsv").value();
  EXPECT_EQ(text.rfind("# gridfeed ledger v3\n", 0), 0u) << text;
  EXPECT_EQ(CountLines(text, "# schedule "), 1) << text;
  EXPECT_NE(text.find("\n# schedule position=3 fingerprint=bbbb\n# config " +
                      std::string(kConfigB) + "\n"),
            std::string::npos)
      << text;
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->version, 3);
  EXPECT_EQ(l->fingerprint, "aaaa");
  ASSERT_EQ(l->schedules.size(), 2u);
  EXPECT_EQ(l->schedules[0].position, 0);
  EXPECT_EQ(l->schedules[0].canonical_config, kConfigA);
  EXPECT_EQ(l->schedules[1].position, 3);
  EXPECT_EQ(l->schedules[1].fingerprint, "bbbb");
  EXPECT_EQ(l->schedules[1].canonical_config, kConfigB);
  EXPECT_EQ(l->ScheduleAt(2), 0u);
  EXPECT_EQ(l->ScheduleAt(3), 1u);
  ASSERT_EQ(l->entries.size(), 7u);  // 3, 4 of the first run were dropped
  for (int p = 0; p < 7; ++p) EXPECT_EQ(l->entries[p].record.position, p);

  // A run whose history lacks the amendment (another branch) may not write here...
  auto other = LedgerWriter::Open(dir, 0, "aaaa", kConfigA, Schedule(6), a);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("position 3"), std::string::npos)
      << other.status().message();
  // ...nor one whose configuration differs besides the schedule.
  auto seed = LedgerWriter::Open(dir, 0, "cccc", "{\"mixture-schedule\":\"B\",\"seed\":2}",
                                 Schedule(6), ab);
  ASSERT_FALSE(seed.ok());
  EXPECT_NE(seed.status().message().find("fingerprint"), std::string::npos);
  // Rolled back to the checkpoint at 2 with schedule A: the amendment goes with its records.
  {
    auto w = LedgerWriter::Open(dir, 0, "aaaa", kConfigA, Schedule(2), a);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
  }
  auto back = ReadLedger(dir);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->schedules.size(), 1u);
  EXPECT_EQ(back->entries.size(), 2u);
}

TEST(Ledger, NewDpRankOfAnAmendedRunStartsFromRankZerosSchedules) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_amend_grow");
  const auto ab = History({{0, "A"}, {4, "B"}});
  {
    auto w = LedgerWriter::Open(dir, 0, "aaaa", kConfigA, Schedule(0), History({{0, "A"}}));
    ASSERT_TRUE(w.ok());
    for (int p = 0; p < 4; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());
  }
  {
    auto w = LedgerWriter::Open(dir, 0, "bbbb", kConfigB, Schedule(4, 2), ab);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
  }
  {
    auto w = LedgerWriter::Open(dir, 1, "bbbb", kConfigB, Schedule(4, 2), ab);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    LedgerRecord r = Rec(5);
    r.dp_rank = 1;
    ASSERT_TRUE((*w)->Append(r).ok());
  }
  const std::string text = io::ReadFileToString(dir + "/dp1.tsv").value();
  EXPECT_EQ(text.rfind("# gridfeed ledger v3\n# fingerprint aaaa\n", 0), 0u) << text;
  EXPECT_EQ(CountLines(text, "# schedule position=4 fingerprint=bbbb"), 1) << text;
  EXPECT_EQ(CountLines(text, "0\t"), 0) << text;  // none of DP rank 0's records
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->schedules.size(), 2u);
  EXPECT_EQ(l->entries.size(), 5u);
}

TEST(Ledger, FilesThatDisagreeOnAnAmendmentAreRefused) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_amend_conflict");
  const std::string head = "# gridfeed ledger v3\n# fingerprint aaaa\n# config {}\n";
  ASSERT_TRUE(io::WriteStringToFile(dir + "/dp0.tsv",
                                    head + "# schedule position=8 fingerprint=bbbb\n# config {}\n")
                  .ok());
  ASSERT_TRUE(io::WriteStringToFile(dir + "/dp1.tsv",
                                    head + "# schedule position=8 fingerprint=cccc\n# config {}\n")
                  .ok());
  auto l = ReadLedger(dir);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("position 8"), std::string::npos) << l.status().message();
  // A schedule line in a version-2 file is malformed.
  ASSERT_TRUE(io::WriteStringToFile(dir + "/dp1.tsv",
                                    "# gridfeed ledger v2\n# fingerprint aaaa\n# config {}\n"
                                    "# schedule position=8 fingerprint=bbbb\n# config {}\n")
                  .ok());
  auto v2 = ReadLedger(dir);
  ASSERT_FALSE(v2.ok());
  EXPECT_EQ(v2.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gridfeed::audit

namespace gridfeed::audit {
namespace {

LedgerStart Fresh(bool overwrite = false) { return {/*resumed=*/false, overwrite}; }

std::string Records(const std::string& dir) {
  auto l = ReadLedger(dir);
  if (!l.ok()) return l.status().ToString();
  std::string out;
  for (const auto& e : l->entries) out += FormatRecord(e.record) + "\n";
  return out;
}

// A fresh run (no resume) into a folder that holds a ledger would rewrite it from position 0:
// refused, naming the folder and the flag, and nothing in the folder changes (also from a DP
// rank whose own file does not exist yet).
TEST(Ledger, FreshRunIntoANonEmptyLedgerIsRefused) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_fresh");
  {
    auto w = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(0), {}, Fresh());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int p = 0; p < 5; ++p) ASSERT_TRUE((*w)->Append(Rec(p)).ok());
  }
  const std::string before = io::ReadFileToString(dir + "/dp0.tsv").value();
  for (int dp_rank : {0, 1}) {
    auto again = LedgerWriter::Open(dir, dp_rank, "00ff", "{}", Schedule(0, 2), {}, Fresh());
    ASSERT_FALSE(again.ok()) << dp_rank;
    const std::string m = again.status().message();
    EXPECT_NE(m.find("'" + dir + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("--overwrite-ledger"), std::string::npos) << m;
  }
  EXPECT_EQ(io::ReadFileToString(dir + "/dp0.tsv").value(), before);
  EXPECT_FALSE(std::filesystem::exists(dir + "/dp1.tsv"));
  // A resume continues it.
  auto resumed = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(4));
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
}

TEST(Ledger, OverwriteReplacesEveryFile) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_overwrite");
  {
    // One job of four writers: all prepare, then all start (as OpenJobLedger does).
    std::vector<std::unique_ptr<LedgerWriter>> job;
    for (int r = 0; r < 4; ++r) {
      auto w = LedgerWriter::Prepare(dir, r, "1111", "{\"seed\":1}", Schedule(0, 4), {}, Fresh());
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      job.push_back(std::move(w).value());
    }
    for (int r = 0; r < 4; ++r) {
      ASSERT_TRUE(job[r]->Start().ok());
      ASSERT_TRUE(job[r]->Append(Rec(r)).ok());
    }
  }
  // Another configuration at DP 1: dp0.tsv starts anew, dp1..dp3.tsv (no DP rank now) go.
  {
    auto w = LedgerWriter::Open(dir, 0, "2222", "{\"seed\":2}", Schedule(0), {}, Fresh(true));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Append(Rec(0)).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/dp1.tsv"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/dp3.tsv"));
  auto l = ReadLedger(dir);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->fingerprint, "2222");
  ASSERT_EQ(l->entries.size(), 1u);
  ASSERT_EQ(l->segments.size(), 1u);
}

// Two jobs on one folder: the second writer of a file is refused while the first holds it,
// naming the folder and the holder; the first job's records are all there.
TEST(Ledger, ASecondJobOnTheFolderIsRefusedWhileTheFirstWrites) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_lock");
  auto first = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(0), {}, Fresh());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  for (int p = 0; p < 3; ++p) ASSERT_TRUE((*first)->Append(Rec(p)).ok());
  for (LedgerStart start : {Fresh(true), LedgerStart{}}) {
    auto second = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(0), {}, start);
    ASSERT_FALSE(second.ok());
    const std::string m = second.status().message();
    EXPECT_NE(m.find("ledger folder '" + dir + "' is in use"), std::string::npos) << m;
    EXPECT_NE(m.find("pid " + std::to_string(::getpid())), std::string::npos) << m;
  }
  // DP rank 0 of a smaller job would trim dp1.tsv: it must hold that file's lock too.
  auto other_rank = LedgerWriter::Open(dir, 1, "00ff", "{}", Schedule(0, 2), {}, Fresh());
  ASSERT_TRUE(other_rank.ok()) << other_rank.status().ToString();
  ASSERT_TRUE((*first)->Flush().ok());
  first->reset();
  auto after = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(4), {}, LedgerStart{});
  ASSERT_FALSE(after.ok()) << "dp1.tsv's writer still holds its lock";
  EXPECT_NE(after.status().message().find("dp1.tsv.lock"), std::string::npos);
  other_rank->reset();
  after = LedgerWriter::Open(dir, 0, "00ff", "{}", Schedule(4), {}, LedgerStart{});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  after->reset();
  EXPECT_EQ(Records(dir),
            FormatRecord(Rec(0)) + "\n" + FormatRecord(Rec(1)) + "\n" + FormatRecord(Rec(2)) + "\n")
      << "the first job's records are all there";
}

// Prepare writes nothing: a job whose other writer is refused leaves the folder as it was.
TEST(Ledger, PrepareWritesNothing) {
  const std::string dir = gridfeed::testing::ScratchDir("ledger_prepare");
  auto w = LedgerWriter::Prepare(dir, 0, "00ff", "{}", Schedule(0), {}, Fresh());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir + "/dp0.tsv"));
  ASSERT_TRUE((*w)->Start().ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/dp0.tsv"));
}

}  // namespace
}  // namespace gridfeed::audit
