#include "gridfeed/checkpoint/cursor.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "testing/paths.h"

namespace gridfeed::checkpoint {
namespace {

Cursor Sample() {
  Cursor c;
  c.fingerprint = "0123456789abcdef";
  c.canonical_config = R"({"seed":1234,"split":"969,30,1"})";
  c.iteration = 42;
  c.consumed_train_samples = 123456789;
  c.consumed_valid_samples = 77;
  c.source_samples = {100, 200};
  c.source_tokens = {6400, 12800};
  c.dp = 2, c.tp = 2, c.pp = 2, c.cp = 1;
  c.micro_batch_size = 4, c.global_batch_size = 16;
  return c;
}

TEST(Cursor, RoundTrips) {
  const std::string path = gridfeed::testing::ScratchDir("cursor") + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  auto c = ReadCursor(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->fingerprint, "0123456789abcdef");
  EXPECT_EQ(c->canonical_config, Sample().canonical_config);
  EXPECT_EQ(c->iteration, 42);
  EXPECT_EQ(c->consumed_train_samples, 123456789);
  EXPECT_EQ(c->consumed_valid_samples, 77);
  EXPECT_EQ(c->source_samples, (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(c->source_tokens, (std::vector<int64_t>{6400, 12800}));
  EXPECT_EQ(c->dp, 2);
  EXPECT_EQ(c->global_batch_size, 16);
  // Overwriting replaces the file whole.
  Cursor later = Sample();
  later.iteration = 43;
  ASSERT_TRUE(WriteCursor(path, later).ok());
  EXPECT_EQ(ReadCursor(path)->iteration, 43);
  EXPECT_EQ(std::distance(
                std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()), {}),
            1);  // no temporary left behind
}

TEST(Cursor, TokenStoreFactsAreOptional) {
  const std::string dir = gridfeed::testing::ScratchDir("cursor_facts");
  Cursor c = Sample();
  ASSERT_TRUE(WriteCursor(dir + "/without.h5", c).ok());
  c.token_store_facts = "0123456789abcdef 42 fedcba9876543210 corpora/x\n";
  ASSERT_TRUE(WriteCursor(dir + "/with.h5", c).ok());
  auto without = ReadCursor(dir + "/without.h5");
  auto with = ReadCursor(dir + "/with.h5");
  ASSERT_TRUE(without.ok() && with.ok());
  EXPECT_EQ(without->token_store_facts, "");
  EXPECT_EQ(with->token_store_facts, c.token_store_facts);
}

TEST(Cursor, FlippedByteIsReportedAsCorruption) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_flip") + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  std::string bytes = io::ReadFileToString(path).value();
  const int64_t value = 123456789;
  const auto at = bytes.find(std::string(reinterpret_cast<const char*>(&value), 8));
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x01;
  ASSERT_TRUE(io::WriteStringToFile(path, bytes).ok());
  auto c = ReadCursor(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("Fletcher32"), std::string::npos) << c.status().message();
}

TEST(Cursor, TruncatedAndMissingFiles) {
  const std::string dir = gridfeed::testing::ScratchDir("cursor_trunc");
  ASSERT_TRUE(WriteCursor(dir + "/ckpt.h5", Sample()).ok());
  std::string bytes = io::ReadFileToString(dir + "/ckpt.h5").value();
  ASSERT_TRUE(io::WriteStringToFile(dir + "/short.h5", bytes.substr(0, bytes.size() / 2)).ok());
  auto t = ReadCursor(dir + "/short.h5");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ReadCursor(dir + "/none.h5").status().code(), StatusCode::kNotFound);
}

TEST(Cursor, NewerFormatIsRejectedClearly) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_version") + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/gridfeed/format_version", H5P_DEFAULT);
    const int64_t next = kFormatVersion + 1;
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &next), 0);
    H5Dclose(d);
    H5Fclose(f);
  }
  auto c = ReadCursor(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("format version 2"), std::string::npos);
}

TEST(Cursor, FailedWriteKeepsTheOldCheckpoint) {
  const std::string dir = gridfeed::testing::ScratchDir("cursor_keep");
  ASSERT_TRUE(WriteCursor(dir + "/ckpt.h5", Sample()).ok());
  const std::string before = io::ReadFileToString(dir + "/ckpt.h5").value();
  EXPECT_FALSE(WriteCursor(dir + "/missing_dir/ckpt.h5", Sample()).ok());
  EXPECT_EQ(io::ReadFileToString(dir + "/ckpt.h5").value(), before);
}

// --- Full disk: writes fail with EFBIG in a child limited by RLIMIT_FSIZE. ---

std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Cursor, FullDiskFailsAndKeepsTheOldCheckpoint) {
  const std::string dir = gridfeed::testing::ScratchDir("cursor_full");
  const std::string path = dir + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  const std::string before = io::ReadFileToString(path).value();
  for (rlim_t limit : {rlim_t{0}, rlim_t{512}, static_cast<rlim_t>(before.size() / 2),
                       static_cast<rlim_t>(before.size() - 1)}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      struct rlimit rl = {limit, limit};
      if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(99);
      Cursor later = Sample();
      later.iteration = 43;
      Status st = WriteCursor(path, later);
      ::_exit(st.ok() ? 1 : (st.code() == StatusCode::kIoError ? 0 : 2));
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "limit " << limit;
    EXPECT_TRUE(io::ReadFileToString(path).value() == before) << "limit " << limit;
    auto c = ReadCursor(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->iteration, 42);
    EXPECT_EQ(DirNames(dir), std::vector<std::string>{"ckpt.h5"}) << "limit " << limit;
  }
}

// --- Hand-edited files, written with the HDF5 C API. ---

// The writer refuses what the reader refuses (a save must never replace a good checkpoint with
// one the resume rejects); a well-formed schedule history round-trips.
TEST(Cursor, WriterRefusesWhatTheReaderRefuses) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_forged") + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  const std::string schedule =
      R"({"sources": {"u16": "corpora/corpus_u16"},)"
      R"( "schedule": [{"name": "main", "samples": 64, "mixture": {"u16": 1}}]})";
  Cursor history = Sample();
  history.schedule_history = nlohmann::json::array({{{"position", 0}, {"schedule", schedule}},
                                                    {{"position", 100}, {"schedule", schedule}}})
                                 .dump();
  ASSERT_TRUE(WriteCursor(path, history).ok());
  auto back = ReadCursor(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->schedule_history, history.schedule_history);
  for (auto edit : std::vector<std::function<void(Cursor*)>>{
           [](Cursor* c) { c->iteration = int64_t{1} << 62; }, [](Cursor* c) { c->iteration = -1; },
           [](Cursor* c) { c->schedule_history = "{\"garbage\": true}"; },
           [](Cursor* c) { c->schedule_history = R"([{"position": 0, "schedule": "nope"}])"; }}) {
    Cursor bad = history;
    edit(&bad);
    const Status st = WriteCursor(path, bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  }
  EXPECT_EQ(ReadCursor(path)->schedule_history, history.schedule_history) << "left untouched";
  EXPECT_FALSE(WriteCursor(path + std::string(1, '\0') + "x", Sample()).ok());
  EXPECT_FALSE(ReadCursor(path + std::string(1, '\0') + "x").ok());
}

struct RawDataset {
  RawDataset(std::vector<int64_t> v = {}) : values(std::move(v)) {}  // NOLINT: implicit
  std::vector<int64_t> values;
  std::vector<hsize_t> dims;  // empty: {values.size()}
  hid_t file_type = H5T_STD_I64LE;
  bool fletcher32 = true;
};

struct RawCheckpoint {
  std::map<std::string, RawDataset> datasets = {
      {"format_version", {{kFormatVersion}}},     {"iteration", {{42}}},
      {"consumed_train_samples", {{100}}},        {"consumed_valid_samples", {{7}}},
      {"consumed_test_samples", {{0}}},           {"source_consumed_samples", {{60, 40}}},
      {"source_consumed_tokens", {{6000, 4000}}}, {"grid_dp_tp_pp_cp", {{2, 1, 1, 1}}},
      {"micro_global_batch_size", {{2, 8}}},
  };
  bool variable_length_fingerprint = false;
  std::map<std::string, std::string> strings;  // further string attributes (schedule_history)
};

void WriteRaw(const std::string& path, const RawCheckpoint& raw) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t g = H5Gcreate2(f, "/gridfeed", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  for (const auto& [name, d] : raw.datasets) {
    std::vector<hsize_t> dims = d.dims;
    if (dims.empty()) dims = {d.values.size()};
    std::vector<hsize_t> chunk(dims.size(), 1);
    hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    ASSERT_GE(H5Pset_chunk(plist, static_cast<int>(chunk.size()), chunk.data()), 0);
    if (d.fletcher32) H5Pset_fletcher32(plist);
    hid_t ds = H5Dcreate2(g, name.c_str(), d.file_type, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    ASSERT_GE(ds, 0) << name;
    hsize_t total = 1;
    for (hsize_t x : dims) total *= x;
    if (total == d.values.size() && total > 0) {
      ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.values.data()), 0);
    }
    H5Dclose(ds);
    H5Pclose(plist);
    H5Sclose(space);
  }
  for (const char* name : {"fingerprint", "canonical_config"}) {
    const std::string value = std::string(name) == "fingerprint" ? "0123456789abcdef" : "{}";
    hid_t type = H5Tcopy(H5T_C_S1);
    hid_t space = H5Screate(H5S_SCALAR);
    if (raw.variable_length_fingerprint && std::string(name) == "fingerprint") {
      H5Tset_size(type, H5T_VARIABLE);
      hid_t a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
      const char* p = value.c_str();
      ASSERT_GE(H5Awrite(a, type, &p), 0);
      H5Aclose(a);
    } else {
      H5Tset_size(type, value.size());
      hid_t a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
      ASSERT_GE(H5Awrite(a, type, value.data()), 0);
      H5Aclose(a);
    }
    H5Sclose(space);
    H5Tclose(type);
  }
  for (const auto& [name, value] : raw.strings) {
    hid_t type = H5Tcopy(H5T_C_S1);
    hid_t space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, value.size());
    hid_t a = H5Acreate2(g, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Awrite(a, type, value.data()), 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
  }
  H5Gclose(g);
  ASSERT_GE(H5Fclose(f), 0);
}

TEST(Cursor, RawWriterMatchesTheSchema) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_raw") + "/ckpt.h5";
  WriteRaw(path, RawCheckpoint{});
  auto c = ReadCursor(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->consumed_train_samples, 100);
  EXPECT_EQ(c->source_tokens, (std::vector<int64_t>{6000, 4000}));
  EXPECT_EQ(c->global_batch_size, 8);
}

struct BadCheckpoint {
  std::string name;
  std::function<void(RawCheckpoint*)> edit;
  std::string message_part;  // the dataset named in the error
  friend void PrintTo(const BadCheckpoint& b, std::ostream* os) { *os << b.name; }
};

class CursorRejects : public ::testing::TestWithParam<BadCheckpoint> {};

TEST_P(CursorRejects, HandEditedFile) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_bad_" + GetParam().name) + "/c.h5";
  RawCheckpoint raw;
  GetParam().edit(&raw);
  WriteRaw(path, raw);
  auto c = ReadCursor(path);
  ASSERT_FALSE(c.ok()) << GetParam().name << " accepted";
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss) << c.status().ToString();
  EXPECT_NE(c.status().message().find(GetParam().message_part), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Files, CursorRejects,
    ::testing::Values(
        BadCheckpoint{"no_fletcher",
                      [](RawCheckpoint* r) { r->datasets["iteration"].fletcher32 = false; },
                      "iteration"},
        BadCheckpoint{"float_iteration",
                      [](RawCheckpoint* r) { r->datasets["iteration"].file_type = H5T_IEEE_F64LE; },
                      "iteration"},
        BadCheckpoint{"int32_samples",
                      [](RawCheckpoint* r) {
                        r->datasets["consumed_train_samples"].file_type = H5T_STD_I32LE;
                      },
                      "consumed_train_samples"},
        BadCheckpoint{"rank2_grid",
                      [](RawCheckpoint* r) {
                        r->datasets["grid_dp_tp_pp_cp"].dims = {2, 2};
                      },
                      "grid_dp_tp_pp_cp"},
        BadCheckpoint{"vector_iteration",
                      [](RawCheckpoint* r) {
                        r->datasets["iteration"].values = {1, 2};
                      },
                      "iteration"},
        BadCheckpoint{"huge_extent",
                      [](RawCheckpoint* r) {
                        r->datasets["source_consumed_samples"].dims = {hsize_t{1} << 40};
                      },
                      "source_consumed_samples"},
        BadCheckpoint{
            "unwritten_elements",
            [](RawCheckpoint* r) { r->datasets["source_consumed_samples"].dims = {1000}; },
            "source_consumed_samples"},
        BadCheckpoint{"unmatched_sources",
                      [](RawCheckpoint* r) {
                        r->datasets["source_consumed_tokens"].values = {1, 2, 3};
                      },
                      "source_consumed_tokens"},
        BadCheckpoint{"negative_samples",
                      [](RawCheckpoint* r) { r->datasets["consumed_train_samples"].values = {-5}; },
                      "consumed_train_samples"},
        BadCheckpoint{"negative_source",
                      [](RawCheckpoint* r) {
                        r->datasets["source_consumed_samples"].values = {1, -1};
                      },
                      "source_consumed_samples"},
        BadCheckpoint{"negative_iteration",
                      [](RawCheckpoint* r) { r->datasets["iteration"].values = {-1}; },
                      "iteration"},
        // Forged values (issue 22): a run at iteration 2^62 would end at once with rc 0.
        BadCheckpoint{
            "forged_iteration",
            [](RawCheckpoint* r) { r->datasets["iteration"].values = {int64_t{1} << 62}; },
            "iteration"},
        BadCheckpoint{"forged_consumed",
                      [](RawCheckpoint* r) {
                        r->datasets["consumed_train_samples"].values = {int64_t{1} << 62 | 1};
                      },
                      "consumed_train_samples"},
        BadCheckpoint{"forged_batch",
                      [](RawCheckpoint* r) {
                        r->datasets["micro_global_batch_size"].values = {2, int64_t{1} << 50};
                      },
                      "micro_global_batch_size"},
        // A garbage schedule_history would be carried into the next checkpoint.
        BadCheckpoint{"history_not_a_list",
                      [](RawCheckpoint* r) { r->strings["schedule_history"] = "garbage"; },
                      "schedule_history"},
        BadCheckpoint{"history_entry_not_an_object",
                      [](RawCheckpoint* r) { r->strings["schedule_history"] = "[1, 2]"; },
                      "schedule_history entry 0"},
        BadCheckpoint{"history_past_the_cursor",
                      [](RawCheckpoint* r) {
                        r->strings["schedule_history"] =
                            R"([{"position": 0, "schedule": "{\"sources\": {\"a\": \"x\"}, )"
                            R"(\"schedule\": [{\"name\": \"m\", \"samples\": 8, )"
                            R"(\"mixture\": {\"a\": 1}}]}"}, {"position": 101, "schedule": "x"}])";
                      },
                      "schedule_history entry 1"},
        BadCheckpoint{"history_unparsable_schedule",
                      [](RawCheckpoint* r) {
                        r->strings["schedule_history"] = R"([{"position": 0, "schedule": "[]"}])";
                      },
                      "holds no mixture schedule"},
        BadCheckpoint{"version_zero",
                      [](RawCheckpoint* r) { r->datasets["format_version"].values = {0}; },
                      "format_version"},
        BadCheckpoint{"zero_dp",
                      [](RawCheckpoint* r) {
                        r->datasets["grid_dp_tp_pp_cp"].values = {0, 1, 1, 1};
                      },
                      "grid_dp_tp_pp_cp"},
        BadCheckpoint{"zero_micro_batch",
                      [](RawCheckpoint* r) {
                        r->datasets["micro_global_batch_size"].values = {0, 8};
                      },
                      "micro_global_batch_size"},
        BadCheckpoint{"missing_dataset",
                      [](RawCheckpoint* r) { r->datasets.erase("consumed_test_samples"); },
                      "consumed_test_samples"},
        BadCheckpoint{"vlen_fingerprint",
                      [](RawCheckpoint* r) { r->variable_length_fingerprint = true; },
                      "fingerprint"}),
    [](const auto& info) { return info.param.name; });

TEST(Cursor, FifoIsRejectedWithoutBlocking) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_fifo") + "/ckpt.h5";
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto c = ReadCursor(path);
    ::_exit(!c.ok() && c.status().code() == StatusCode::kIoError &&
                    c.status().message().find(path) != std::string::npos
                ? 0
                : 1);
  }
  int status = 0;
  for (int i = 0; i < 1000 && ::waitpid(pid, &status, WNOHANG) != pid; ++i) ::usleep(10000);
  if (::kill(pid, 0) == 0) {  // still running: blocked in open()
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    FAIL() << "ReadCursor blocked on a FIFO";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace gridfeed::checkpoint

#include "gridfeed/checkpoint/resume_policy.h"
#include "gridfeed/config/canonical.h"

namespace gridfeed::checkpoint {
namespace {

// A cursor past what the run's split holds is refused naming the file (a forged checkpoint
// would otherwise end the run at once, successfully, having read nothing).
TEST(Resume, CursorBeyondTheSplitIsRefused) {
  Cursor saved = Sample();
  saved.canonical_config = R"({"seed":1})";
  saved.fingerprint = config::FingerprintOf(saved.canonical_config);
  saved.global_batch_size = 16;
  ResumeRequest now;
  now.path = "/x/ck.h5";
  now.fingerprint = saved.fingerprint;
  now.canonical_config = saved.canonical_config;
  now.global_batch_size = 16;
  now.micro_batch_size = 4;
  now.dp = 2;
  now.max_consumed = saved.consumed_train_samples;
  EXPECT_TRUE(CheckResume(saved, now).ok()) << "at the split's end";
  now.max_consumed = saved.consumed_train_samples - 1;
  auto r = CheckResume(saved, now);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("'/x/ck.h5'"), std::string::npos) << r.status().message();
  now.max_consumed = -1;  // cyclic: no bound
  EXPECT_TRUE(CheckResume(saved, now).ok());
}

}  // namespace
}  // namespace gridfeed::checkpoint
