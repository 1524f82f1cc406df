// The Feeder on a real MPI job: every rank receives exactly the fields Megatron's get_batch
// would give it (checked against the golden micro-batches and against the golden-verified
// order module), only readers hold tables, nothing is written, and injected failures end
// with the same error on every rank.
//
// Every rank makes the same collective calls on every path: a check that can fail on one rank
// between collectives is combined over all ranks (GRIDFEED_ASSERT_ALL_RANKS, all_ranks.h) and
// every rank leaves together, instead of one rank returning from an ASSERT and the others
// waiting for it in the next collective (the Feeder's destructor is one) until the timeout.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "gridfeed/checkpoint/cursor.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/cp_zigzag.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/read_schedule.h"
#include "gridfeed/parallel/agree.h"
#include "mpi/all_ranks.h"
#include "testing/paths.h"

namespace gridfeed::feed {
namespace {

using gridfeed::testing::AllRanksPass;
using gridfeed::testing::GoldenDir;
using gridfeed::testing::RanksWhere;

int WorldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Collective: Open ended on every rank as `want_ok` says (records a failure otherwise, see
// AllRanksPass). Where Open succeeded on some ranks only, those ranks abandon (leak) their
// Feeder: its destructor is collective and the ranks without one would never join it.
bool OpenEndedOnEveryRank(Result<std::unique_ptr<Feeder>>& f, bool want_ok, const char* file,
                          int line) {
  const int opened = RanksWhere(f.ok());
  const bool alike = opened == 0 || opened == WorldSize();
  const bool ok = f.ok();
  if (!alike && ok) (void)f->release();
  std::string why;
  if (!alike) why = "Open ended differently across ranks; here: ";
  if (ok) {
    why += "opened";
  } else {
    why += f.status().ToString();
  }
  return AllRanksPass(alike && ok == want_ok, why, file, line);
}
#define ASSERT_OPEN_ALL_RANKS(f, want_ok)                        \
  do {                                                           \
    if (!OpenEndedOnEveryRank(f, want_ok, __FILE__, __LINE__)) { \
      return;                                                    \
    }                                                            \
  } while (0)

struct Layout {
  int tp, pp, cp;
};

// Layouts (TP x PP x CP, DP = world / their product) that fit this world size.
std::vector<Layout> Layouts() {
  std::vector<Layout> all = {{2, 2, 1}, {1, 2, 2}, {2, 1, 2}, {1, 1, 1}, {2, 1, 1},
                             {1, 2, 1}, {1, 1, 2}, {1, 4, 1}, {4, 1, 1}, {2, 2, 2}};
  std::vector<Layout> out;
  for (auto l : all) {
    if (WorldSize() % (l.tp * l.pp * l.cp) == 0) out.push_back(l);
  }
  return out;
}

// A case's Megatron inputs (case.json "inputs") and the micro-batches taken from Megatron's
// DataLoader at golden_dp data-parallel ranks (case.json "batches"; golden_dp 0: none).
struct GoldenBatchCase {
  std::string name;
  nlohmann::json inputs;
  int64_t mbs = 0, consumed = 0, golden_dp = 0;
  int64_t seq_length() const { return inputs["seq_length"].get<int64_t>(); }
};

// A plain single-corpus configuration for the tests that need one that opens.
GoldenBatchCase BaseCase() {
  GoldenBatchCase c;
  c.name = "base";
  c.inputs = nlohmann::json::parse(R"({"data_path": ["corpora/corpus_u16"], "split": "969,30,1",
      "seq_length": 64, "seed": 1234, "sizes": [3000, 120, 30], "tokenizer": {"eod_id": 0}})");
  c.mbs = 4;
  c.consumed = 8;
  return c;
}

// Every golden case with DataLoader micro-batches of the train split over --data-path, by name.
std::vector<GoldenBatchCase> GoldenBatchCases() {
  std::vector<GoldenBatchCase> out;
  for (const auto& e : std::filesystem::directory_iterator(GoldenDir() + "/cases")) {
    std::ifstream in(e.path() / "case.json");
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("batches") || !j["inputs"]["data_path"].is_array() ||
        j["batches"].value("split", "") != "train") {
      continue;
    }
    GoldenBatchCase c;
    c.name = e.path().filename().string();
    c.inputs = j["inputs"];
    c.mbs = j["batches"]["mbs"].get<int64_t>();
    c.consumed = j["batches"]["consumed"].get<int64_t>();
    c.golden_dp = j["batches"]["dp"].get<int64_t>();
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

FeederOptions OptionsFor(const GoldenBatchCase& c, Layout l) {
  const nlohmann::json& in = c.inputs;
  FeederOptions o;
  o.data.data_path = in["data_path"].get<std::vector<std::string>>();
  o.data.split = in["split"].is_string() ? in["split"].get<std::string>() : "";
  o.data.seq_length = in["seq_length"].get<int64_t>();
  o.data.seed = in["seed"].get<int64_t>();
  std::string* samples[] = {&o.data.train_samples, &o.data.valid_samples, &o.data.test_samples};
  for (size_t i = 0; i < 3; ++i) {
    const auto& n = in["sizes"][i];
    *samples[i] = n.is_number_integer() ? std::to_string(n.get<int64_t>()) : "none";
  }
  o.data.eod_id = in["tokenizer"].value("eod_id", int64_t{0});
  const nlohmann::json pad = in["tokenizer"].value("pad_id", nlohmann::json());
  o.data.pad_id = pad.is_number_integer() ? pad.get<int64_t>() : -1;
  o.data.reset_position_ids = in.value("reset_position_ids", false);
  o.data.reset_attention_mask = in.value("reset_attention_mask", false);
  o.data.eod_mask_loss = in.value("eod_mask_loss", false);
  o.data.create_attention_mask = in.value("create_attention_mask", false);
  o.data.no_add_extra_token = !in.value("add_extra_token_to_sequence", true);
  o.data.no_drop_last_partial_validation_sequence =
      !in.value("drop_last_partial_validation_sequence", true);
  o.data.mid_level_dataset_surplus = in.value("mid_level_dataset_surplus", 0.005);
  o.grid.tensor_model_parallel_size = l.tp;
  o.grid.pipeline_model_parallel_size = l.pp;
  o.grid.context_parallel_size = l.cp;
  o.batch.micro_batch_size = c.mbs;
  o.resume.consumed_samples = c.consumed;
  o.feed.prefetch_depth = 2;
  return o;
}

std::vector<std::string> ListTree(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class FeederMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    cwd_ = std::filesystem::current_path();
    std::filesystem::current_path(GoldenDir());  // data paths are relative, as Megatron ran
  }
  void TearDown() override { std::filesystem::current_path(cwd_); }
  std::filesystem::path cwd_;
};

template <typename T>
std::vector<T> Slice(const std::vector<T>& full, int64_t rows, int64_t S, int64_t inner, int cp,
                     int r) {
  return order::CpZigzagSlice(full, rows, S, inner, cp, r);
}

TEST_F(FeederMpi, EveryRankGetsWhatGetBatchGives) {
  const auto cases = GoldenBatchCases();
  GRIDFEED_ASSERT_ALL_RANKS(!cases.empty(), "no golden case has DataLoader micro-batches");
  for (const auto& c : cases) {
    for (Layout l : Layouts()) {
      SCOPED_TRACE(c.name + " TP" + std::to_string(l.tp) + " PP" + std::to_string(l.pp) + " CP" +
                   std::to_string(l.cp));
      const FeederOptions o = OptionsFor(c, l);
      const auto before = WorldRank() == 0 ? ListTree(".") : std::vector<std::string>{};
      auto f = Feeder::Open(o, MPI_COMM_WORLD);
      ASSERT_OPEN_ALL_RANKS(f, true);
      const auto& g = (*f)->grid();
      EXPECT_EQ((*f)->holds_tables(), g.is_reader());
      EXPECT_EQ((*f)->num_open_token_files() > 0, g.is_reader()) << "only readers open .bin";
      if (WorldRank() == 0) {
        EXPECT_EQ(ListTree("."), before) << "the build wrote a file";
      }

      // Expected: the golden-verified order module on this rank, through the same schedule.
      auto pipeline = order::Pipeline::For(o);
      GRIDFEED_ASSERT_ALL_RANKS(pipeline.ok(), pipeline.status().ToString());
      auto built = (*pipeline)->Build();
      GRIDFEED_ASSERT_ALL_RANKS(built.ok(), built.status().ToString());
      const order::OrderView& view = (*built)->view();
      const int64_t S = c.seq_length(), mbs = c.mbs, dp = g.dp_size();
      order::ScheduleOptions so;
      so.total_samples = view.length(order::Split::kTrain);
      so.micro_batch_size = mbs;
      so.dp_size = dp;
      so.start_consumed = c.consumed;
      auto schedule = order::ReadSchedule::Create(so);
      GRIDFEED_ASSERT_ALL_RANKS(schedule.ok(), schedule.status().ToString());
      auto walker = schedule->Walk(g.dp_rank());
      const int steps = 3;
      const bool golden = dp == c.golden_dp;  // Megatron's micro-batches at its DP size
      const std::string gdir =
          GoldenDir() + "/cases/" + c.name + "/batches/dp_rank_" + std::to_string(g.dp_rank());
      for (int step = 0; step < steps; ++step) {
        auto mb = (*f)->Next();
        GRIDFEED_ASSERT_ALL_RANKS(mb.ok(), mb.status().ToString());
        // This rank's checks of the micro-batch: local, so an ASSERT in here leaves only the
        // lambda, and every rank learns of it below, before the next Next().
        auto check_step = [&] {
          const bool middle = !g.first_stage() && !g.last_stage();
          EXPECT_EQ(mb->has_inputs, g.first_stage());
          EXPECT_EQ(mb->has_targets, g.last_stage());
          if (middle) {
            EXPECT_TRUE(mb->tokens().empty() && mb->labels().empty() && mb->sample_indices.empty());
            return;
          }
          std::vector<int64_t> want_idx, want_sources, tokens, labels, positions;
          std::vector<float> loss;
          order::StepBatch batch;
          ASSERT_TRUE(walker.Next(&batch));
          for (int64_t k = 0; k < mbs; ++k) {
            const int64_t p = c.consumed + (step * dp + g.dp_rank()) * mbs + k;
            EXPECT_EQ(batch.positions[k], p);
            want_idx.push_back(p);
            order::Sample s;
            want_sources.push_back(view.Read(order::Split::kTrain, p, &s, false).dataset);
            auto put = [&](auto& to, const auto& from) {
              auto sliced = Slice(from, 1, S, 1, g.cp_size(), g.cp_rank());
              to.insert(to.end(), sliced.begin(), sliced.end());
            };
            put(tokens, s.tokens);
            put(labels, s.labels);
            put(positions, s.position_ids);
            put(loss, s.loss_mask);
          }
          EXPECT_EQ(mb->sample_indices, want_idx);
          EXPECT_EQ(mb->sample_positions, want_idx);  // Megatron: index = position
          EXPECT_EQ(mb->source_ids, want_sources);
          if (mb->has_inputs) {
            EXPECT_TRUE(std::ranges::equal(mb->tokens(), tokens));
            EXPECT_TRUE(std::ranges::equal(mb->position_ids(), positions));
          }
          if (mb->has_targets) {
            EXPECT_TRUE(std::ranges::equal(mb->labels(), labels));
            EXPECT_TRUE(std::ranges::equal(mb->loss_mask(), loss));
          }
          if (golden) {
            // Megatron's own DataLoader micro-batches, CP-sliced like get_batch_on_this_cp_rank.
            auto gnpy = io::ReadNpy(gdir + "/sample_indices.npy");
            ASSERT_TRUE(gnpy.ok()) << gnpy.status().ToString();
            auto gi = gnpy->As<int64_t>();
            if (static_cast<size_t>((step + 1) * mbs) > gi.size()) return;
            std::vector<int64_t> gstep(gi.begin() + step * mbs, gi.begin() + (step + 1) * mbs);
            EXPECT_EQ(mb->sample_indices, gstep);
            auto rows = [&](const std::string& name, auto tag) {
              using T = decltype(tag);
              // Where Megatron's loss-mask cache leak shows, the mask without it.
              std::string file = gdir + "/" + name;
              if (name == "loss_mask.npy" &&
                  std::filesystem::exists(gdir + "/loss_mask_without_cache_leak.npy")) {
                file = gdir + "/loss_mask_without_cache_leak.npy";
              }
              auto npy = io::ReadNpy(file);
              if (!npy.ok()) {
                ADD_FAILURE() << npy.status().ToString();
                return std::vector<T>{};
              }
              auto all = npy->As<T>();
              std::vector<T> part(all.begin() + step * mbs * S, all.begin() + (step + 1) * mbs * S);
              return Slice(part, mbs, S, 1, g.cp_size(), g.cp_rank());
            };
            if (mb->has_inputs) {
              EXPECT_TRUE(std::ranges::equal(mb->tokens(), rows("tokens.npy", int64_t{})));
              EXPECT_TRUE(
                  std::ranges::equal(mb->position_ids(), rows("position_ids.npy", int64_t{})));
            }
            if (mb->has_targets) {
              EXPECT_TRUE(std::ranges::equal(mb->labels(), rows("labels.npy", int64_t{})));
              EXPECT_TRUE(std::ranges::equal(mb->loss_mask(), rows("loss_mask.npy", float{})));
            }
          }
        };
        check_step();
        GRIDFEED_ASSERT_ALL_RANKS(!HasFatalFailure(),
                                  "step " + std::to_string(step) + ": a fatal check failed here");
      }
      EXPECT_EQ((*f)->consumed_samples(), c.consumed + steps * mbs * dp);
    }
  }
}

// Collective: every rank ended with the same error message as rank 0.
void ExpectSameEverywhere(const Status& s) {
  std::string first = s.message();
  int len = static_cast<int>(first.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  first.resize(static_cast<size_t>(len));
  MPI_Bcast(first.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  AllRanksPass(
      s.message() == first,
      "ranks ended with different errors; this one: " + s.ToString() + "; rank 0's: " + first,
      __FILE__, __LINE__);
}

TEST_F(FeederMpi, CorruptIndexOnRankZeroFailsEverywhere) {
  const std::string dir = "/tmp/gridfeed_mpi_corrupt";
  Status written;
  if (WorldRank() == 0) {
    std::filesystem::create_directories(dir);
    written = io::WriteStringToFile(dir + "/bad.idx", std::string(64, 'X'));
    if (written.ok()) written = io::WriteStringToFile(dir + "/bad.bin", "");
  }
  GRIDFEED_ASSERT_ALL_RANKS(written.ok(), written.ToString());  // also the barrier
  FeederOptions o = OptionsFor(BaseCase(), {1, 1, 1});
  o.data.data_path = {dir + "/bad"};
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  ASSERT_OPEN_ALL_RANKS(f, false);
  EXPECT_NE(f.status().message().find("rank 0"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("magic"), std::string::npos) << f.status().message();
  ExpectSameEverywhere(f.status());
}

TEST_F(FeederMpi, OneReaderCannotOpenItsTokenFiles) {
  FeederOptions o = OptionsFor(BaseCase(), {1, 1, 1});  // every rank is a reader
  o.feed.testing_fail_open_rank = WorldSize() - 1;
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  ASSERT_OPEN_ALL_RANKS(f, false);
  EXPECT_NE(f.status().message().find("rank " + std::to_string(WorldSize() - 1)), std::string::npos)
      << f.status().message();
  ExpectSameEverywhere(f.status());
}

TEST_F(FeederMpi, DifferentConfigOnOneRankIsRefused) {
  FeederOptions o = OptionsFor(BaseCase(), {1, 1, 1});
  if (WorldRank() == WorldSize() - 1 && WorldSize() > 1) o.data.seed += 1;
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  if (WorldSize() == 1) {  // the same branch on every rank
    EXPECT_TRUE(f.ok());
    return;
  }
  ASSERT_OPEN_ALL_RANKS(f, false);
  EXPECT_NE(f.status().message().find("--seed"), std::string::npos) << f.status().message();
  ExpectSameEverywhere(f.status());
}

TEST_F(FeederMpi, BadBatchSizesAreReportedBeforeAnyBuild) {
  FeederOptions o = OptionsFor(BaseCase(), {1, 1, 1});
  o.batch.global_batch_size = o.batch.micro_batch_size * WorldSize() + 1;
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  ASSERT_OPEN_ALL_RANKS(f, false);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("global-batch-size"), std::string::npos);
  ExpectSameEverywhere(f.status());
}

TEST_F(FeederMpi, DeviceBroadcastWithoutAGpuFailsTheSameEverywhere) {
  FeederOptions o = OptionsFor(BaseCase(), {1, 1, 1});
  o.feed.device_broadcast = true;
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  // Either way on every rank: opened (a machine with a GPU per rank) or failed.
  ASSERT_OPEN_ALL_RANKS(f, f.ok());
  if (f.ok()) {
    // A machine with a GPU per rank: the payload must arrive on the device.
    auto mb = (*f)->Next();
    GRIDFEED_ASSERT_ALL_RANKS(mb.ok(), mb.status().ToString());
    EXPECT_NE(mb->device_payload, nullptr);
    EXPECT_GT(mb->device_payload_bytes, 0u);
    return;
  }
  EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(f.status().message().find("device broadcast"), std::string::npos);
  ExpectSameEverywhere(f.status());
}

// A mixture whose last stage reads 256-token samples: every rank, middle stages included,
// learns each micro-batch's length; readers get the samples the order module gives at it.
TEST_F(FeederMpi, MixtureStageLengthShapesEveryMicroBatch) {
  const std::string schedule = R"({"sources": {"u16": "corpora/corpus_u16",
      "i32": "corpora/corpus_i32"},
      "schedule": [{"name": "main", "iterations": 3, "mixture": {"u16": 1, "i32": 1}},
                   {"name": "long", "iterations": 2, "seq_length": 256,
                    "mixture": {"u16": 1, "i32": 3}}]})";
  auto parsed = config::ParseMixtureSchedule(schedule);
  GRIDFEED_ASSERT_ALL_RANKS(parsed.ok(), parsed.status().ToString());
  for (Layout l : Layouts()) {
    SCOPED_TRACE("TP" + std::to_string(l.tp) + " PP" + std::to_string(l.pp) + " CP" +
                 std::to_string(l.cp));
    FeederOptions o;
    o.data.mixture_schedule = config::MixtureScheduleJson(*parsed);
    o.data.split = "99,1,0";
    o.data.seq_length = 128;
    o.data.seed = 99;
    o.grid.tensor_model_parallel_size = l.tp;
    o.grid.pipeline_model_parallel_size = l.pp;
    o.grid.context_parallel_size = l.cp;
    o.batch.micro_batch_size = 2;
    o.feed.prefetch_depth = 2;
    auto f = Feeder::Open(o, MPI_COMM_WORLD);
    ASSERT_OPEN_ALL_RANKS(f, true);
    const auto& g = (*f)->grid();
    EXPECT_EQ((*f)->max_seq_length(), 256);
    auto pipeline = order::Pipeline::For((*f)->options());
    GRIDFEED_ASSERT_ALL_RANKS(pipeline.ok(), pipeline.status().ToString());
    auto built = (*pipeline)->Build();
    GRIDFEED_ASSERT_ALL_RANKS(built.ok(), built.status().ToString());
    const order::OrderView& view = (*built)->view();
    const int64_t mbs = 2, dp = g.dp_size();
    for (int64_t step = 0; step < 5; ++step) {
      auto mb = (*f)->Next();
      GRIDFEED_ASSERT_ALL_RANKS(mb.ok(), mb.status().ToString());
      auto check_step = [&] {
        const int64_t S = step < 3 ? 128 : 256;
        EXPECT_EQ(mb->seq_length, S) << "step " << step;
        EXPECT_EQ(mb->local_seq_length, S / g.cp_size());
        if (mb->empty()) return;
        std::vector<int64_t> want_sources, tokens, labels;
        for (int64_t k = 0; k < mbs; ++k) {
          const int64_t p = (step * dp + g.dp_rank()) * mbs + k;
          EXPECT_EQ(mb->sample_positions[static_cast<size_t>(k)], p);
          order::Sample s;
          want_sources.push_back(view.Read(order::Split::kTrain, p, &s, false).dataset);
          ASSERT_EQ(static_cast<int64_t>(s.tokens.size()), S);
          auto put = [&](auto& to, const auto& from) {
            auto sliced = Slice(from, 1, S, 1, g.cp_size(), g.cp_rank());
            to.insert(to.end(), sliced.begin(), sliced.end());
          };
          put(tokens, s.tokens);
          put(labels, s.labels);
        }
        EXPECT_EQ(mb->source_ids, want_sources);
        if (mb->has_inputs) {
          EXPECT_TRUE(std::ranges::equal(mb->tokens(), tokens));
        }
        if (mb->has_targets) {
          EXPECT_TRUE(std::ranges::equal(mb->labels(), labels));
        }
      };
      check_step();
      GRIDFEED_ASSERT_ALL_RANKS(!HasFatalFailure(),
                                "step " + std::to_string(step) + ": a fatal check failed here");
    }
    auto end = (*f)->Next();
    GRIDFEED_ASSERT_ALL_RANKS(!end.ok(), "the schedule has 5 iterations");
  }
}

// An amended-schedule resume rebuilds the saved order on rank 0 (to compare the past). A saved
// schedule whose tables do not fit in memory (a forged or foreign checkpoint) made rank 0 throw
// out of Open while the other ranks waited for its verdict forever; now every rank returns the
// same error naming rank 0.
TEST_F(FeederMpi, AmendedResumeWhoseSavedOrderCannotBeBuiltFailsEverywhere) {
  auto schedule = [](const char* samples) {
    return std::string(
               R"({"sources": {"u16": "corpora/corpus_u16", "i32": "corpora/corpus_i32"},)") +
           R"( "schedule": [{"name": "main", "samples": )" + samples +
           R"(, "mixture": {"u16": 0.7, "i32": 0.3}}]})";
  };
  auto parsed = config::ParseMixtureSchedule(schedule("64"));
  GRIDFEED_ASSERT_ALL_RANKS(parsed.ok(), parsed.status().ToString());
  FeederOptions o;
  o.data.mixture_schedule = config::MixtureScheduleJson(*parsed);
  o.data.split = "969,30,1";
  o.data.seq_length = 64;
  o.batch.micro_batch_size = 2;
  const std::string path = "/tmp/gridfeed_mpi_forged_schedule.h5";
  {
    auto f = Feeder::Open(o, MPI_COMM_WORLD);
    ASSERT_OPEN_ALL_RANKS(f, true);
    auto mb = (*f)->Next();
    GRIDFEED_ASSERT_ALL_RANKS(mb.ok(), mb.status().ToString());
    const Status saved = (*f)->SaveCheckpoint(path, 1);
    GRIDFEED_ASSERT_ALL_RANKS(saved.ok(), saved.ToString());
  }
  // Rank 0 forges the saved schedule: a stage of 10^12 samples (its tables exceed memory).
  Status forged;
  if (WorldRank() == 0) {
    auto c = checkpoint::ReadCursor(path);
    if (c.ok()) {
      auto canonical = nlohmann::json::parse(c->canonical_config);
      auto huge = config::ParseMixtureSchedule(schedule("1000000000000"));
      if (huge.ok()) {
        canonical["mixture-schedule"] = config::MixtureScheduleJson(*huge);
        c->canonical_config = canonical.dump();
        c->fingerprint = config::FingerprintOf(c->canonical_config);
        forged = checkpoint::WriteCursor(path, *c);
      } else {
        forged = huge.status();
      }
    } else {
      forged = c.status();
    }
  }
  GRIDFEED_ASSERT_ALL_RANKS(forged.ok(), forged.ToString());
  o.resume.resume_from = path;
  o.resume.allow_schedule_change = true;
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  ASSERT_OPEN_ALL_RANKS(f, false);
  EXPECT_NE(f.status().message().find("rank 0"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
  ExpectSameEverywhere(f.status());
}

TEST_F(FeederMpi, SplitRunsOutOnEveryRankTogether) {
  FeederOptions o = OptionsFor(BaseCase(), {1, 1, 1});
  o.feed.split_name = "test";  // 36 samples
  o.resume.consumed_samples = 0;
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  ASSERT_OPEN_ALL_RANKS(f, true);
  int steps = 0;
  // Bounded: a split that never runs out fails here instead of looping until the timeout.
  for (int tries = 0; tries <= 36; ++tries) {
    auto mb = (*f)->Next();
    const int got = RanksWhere(mb.ok());
    GRIDFEED_ASSERT_ALL_RANKS(
        got == 0 || got == WorldSize(),
        "after " + std::to_string(steps) + " micro-batches, " + std::to_string(got) + " of " +
            std::to_string(WorldSize()) +
            " ranks got one; here: " + (mb.ok() ? std::string("one") : mb.status().ToString()));
    if (!mb.ok()) {
      EXPECT_EQ(mb.status().code(), StatusCode::kOutOfRange);
      break;
    }
    ++steps;
  }
  EXPECT_EQ(steps, 36 / (o.batch.micro_batch_size * WorldSize()));
}

// The leaders' exchange of sections (parallel::ExchangeBytes): every pair's bytes arrive whole,
// empty ones included; a rank that passes the wrong number of parts gets the same error as
// every other rank, before anything moves.
TEST(ExchangeBytes, EveryPairsBytesArriveWhole) {
  const int n = WorldSize();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto byte_of = [](int from, int to, size_t i) {
    return static_cast<std::byte>(from * 31 + to * 17 + static_cast<int>(i));
  };
  auto size_of = [](int from, int to) {
    return static_cast<size_t>((from * 7 + to * 3) % 11) * 97;
  };
  std::vector<std::vector<std::byte>> parts(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < size_of(rank, q); ++i) parts[q].push_back(byte_of(rank, q, i));
  }
  std::vector<std::span<const std::byte>> send(parts.begin(), parts.end());
  std::vector<std::vector<std::byte>> got;
  const Status st = parallel::ExchangeBytes(MPI_COMM_WORLD, rank, send, &got);
  bool same = st.ok() && got.size() == static_cast<size_t>(n);
  for (int q = 0; same && q < n; ++q) {
    same = got[q].size() == size_of(q, rank);
    for (size_t i = 0; same && i < got[q].size(); ++i) same = got[q][i] == byte_of(q, rank, i);
  }
  GRIDFEED_ASSERT_ALL_RANKS(same, "rank " + std::to_string(rank) + ": " + st.ToString());
  if (n < 2) return;
  // The last rank passes one part too few: every rank learns it, nobody waits.
  if (rank == n - 1) send.pop_back();
  const Status bad = parallel::ExchangeBytes(MPI_COMM_WORLD, rank, send, &got);
  const bool refused =
      !bad.ok() && bad.message().find("rank " + std::to_string(n - 1) +
                                      ": ExchangeBytes: " + std::to_string(n - 1) + " parts for " +
                                      std::to_string(n) + " ranks") != std::string::npos;
  GRIDFEED_ASSERT_ALL_RANKS(refused, "rank " + std::to_string(rank) + ": " + bad.ToString());
}

}  // namespace
}  // namespace gridfeed::feed
