// The golden unit vectors: parsing, helpers.cpp calls, numpy shuffles, torch randperm,
// both samplers and CP zigzag, each compared exactly with what Megatron's code produced.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "golden_util.h"
#include "gridfeed/order/blend.h"
#include "gridfeed/order/cp_zigzag.h"
#include "gridfeed/order/gpt_tables.h"
#include "gridfeed/order/numpy_random.h"
#include "gridfeed/order/read_schedule.h"
#include "gridfeed/order/split.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

using gridfeed::testing::ExpectNpyEquals;
using gridfeed::testing::GoldenDir;
using gridfeed::testing::ReadJson;
using nlohmann::json;

bool IsError(const json& out) { return out.is_object() && out.contains("error"); }

double JsonDouble(const json& v) {
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "NaN") return std::nan("");
    return s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
  }
  return v.get<double>();
}

void ExpectSameDoubles(const std::vector<double>& got, const json& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = JsonDouble(want[i]);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(got[i]));
    } else {
      EXPECT_EQ(got[i], w) << "element " << i;  // bit-exact, not approximately
    }
  }
}

void ExpectMatrix(const SplitMatrix& m, const json& want) {
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(m[k].has_value(), !want[k].is_null()) << "bookend " << k;
    if (m[k]) ExpectSameDoubles({m[k]->first, m[k]->second}, want[k]);
  }
}

const json& Parsing() {
  static const json j = ReadJson(GoldenDir() + "/parsing/parsing.json");
  return j;
}

TEST(GoldenParsing, GetBlendFromList) {
  for (const auto& e : Parsing()["get_blend_from_list"]) {
    SCOPED_TRACE(e["input"].dump());
    if (e["input"].is_null()) continue;  // Python None in, None out: no flag to parse
    auto b = ParseDataPath(e["input"].get<std::vector<std::string>>());
    if (IsError(e["output"])) {
      EXPECT_FALSE(b.ok());
      continue;
    }
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->prefixes, e["output"]["prefixes"].get<std::vector<std::string>>());
    ASSERT_EQ(b->weights.has_value(), !e["output"]["weights"].is_null());
    if (b->weights) {
      ExpectSameDoubles(*b->weights, e["output"]["weights"]);
    }
  }
}

TEST(GoldenParsing, ParseAndNormalizeSplit) {
  for (const auto& e : Parsing()["parse_and_normalize_split"]) {
    SCOPED_TRACE(e["input"].dump());
    const std::string input = e["input"].get<std::string>();
    auto v = ParseAndNormalizeSplit(input);
    // Deliberately unlike Megatron, whose regex reads "-1,2" as 1, 2: a negative weight is
    // refused naming --split.
    if (input.find('-') != std::string::npos) {
      ASSERT_FALSE(v.ok());
      EXPECT_NE(v.status().message().find("--split '" + input + "': '-1' is negative"),
                std::string::npos)
          << v.status().ToString();
      continue;
    }
    if (IsError(e["output"])) {
      EXPECT_FALSE(v.ok());
      continue;
    }
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    ExpectSameDoubles({(*v)[0], (*v)[1], (*v)[2]}, e["output"]["vector"]);
    ExpectMatrix(SplitVectorToMatrix(*v), e["output"]["matrix"]);
  }
}

TEST(GoldenParsing, TwoVectorSplitMatrix) {
  for (const auto& e : Parsing()["convert_split_vector_to_split_matrix"]) {
    auto a = e["vector_a"].get<std::array<double, 3>>();
    auto b = e["vector_b"].get<std::array<double, 3>>();
    ExpectMatrix(SplitVectorToMatrix(a, b), e["output"]);
  }
}

TEST(GoldenParsing, Normalize) {
  for (const auto& e : Parsing()["normalize"]) {
    SCOPED_TRACE(e["input"].dump());
    std::vector<double> in;
    for (const auto& v : e["input"]) in.push_back(JsonDouble(v));
    ExpectSameDoubles(Normalize(in), e["output"]);
  }
}

TEST(GoldenParsing, SizePerSplitPerDataset) {
  for (const auto& e : Parsing()["get_size_per_split_per_dataset"]) {
    std::array<std::optional<int64_t>, 3> target;
    for (int i = 0; i < 3; ++i) {
      if (!e["target_size_per_split"][i].is_null()) target[i] = e["target_size_per_split"][i];
    }
    std::vector<double> w = e["normalized_weights"].get<std::vector<double>>();
    ExpectSameDoubles(Normalize(e["raw_weights"].get<std::vector<double>>()),
                      e["normalized_weights"]);
    auto got = SizePerSplitPerDataset(w, target, e["surplus"].get<double>());
    for (size_t k = 0; k < got.size(); ++k) {
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(got[k][i].has_value(), !e["output"][k][i].is_null());
        if (got[k][i]) {
          EXPECT_EQ(*got[k][i], e["output"][k][i].get<int64_t>());
        }
      }
    }
  }
}

TEST(GoldenParsing, SplitToIndexRanges) {
  for (const auto& e : Parsing()["split_to_index_ranges"]) {
    SCOPED_TRACE(e["split"].dump() + " n=" + e["num_elements"].dump());
    auto v = ParseAndNormalizeSplit(e["split"].get<std::string>());
    ASSERT_TRUE(v.ok());
    auto m = SplitVectorToMatrix(*v);
    ExpectMatrix(m, e["matrix"]);
    for (int k = 0; k < 3; ++k) {
      if (!m[k]) continue;
      auto r = BookendToRange(*m[k], e["num_elements"].get<int64_t>());
      EXPECT_EQ(r.first, e["ranges"][k][0].get<int64_t>());
      EXPECT_EQ(r.second, e["ranges"][k][1].get<int64_t>());
    }
  }
}

const json& Units() {
  static const json j = ReadJson(GoldenDir() + "/helpers_units/units.json");
  return j;
}

TEST(GoldenHelpers, BuildSampleIdx) {
  for (const auto& e : Units()["build_sample_idx"]) {
    const std::string dir = GoldenDir() + "/helpers_units/" + e["name"].get<std::string>();
    SCOPED_TRACE(dir);
    auto sizes = io::ReadNpy(dir + "/sizes.npy")->As<int32_t>();
    auto doc = io::ReadNpy(dir + "/document_index.npy")->As<int32_t>();
    io::LeSpan<int32_t> lengths(reinterpret_cast<const std::byte*>(sizes.data()), sizes.size());
    auto out = BuildSampleIndex<int32_t>(lengths, doc, e["seq_length"], e["num_epochs"],
                                         e["tokens_per_epoch"], e["drop_last_partial_sequence"],
                                         e["add_extra_token_to_sequence"]);
    ExpectNpyEquals(dir + "/sample_index.npy", out, {static_cast<int64_t>(out.size() / 2), 2});
  }
}

TEST(GoldenHelpers, BlendingIndices) {
  for (const auto& e : Units()["build_blending_indices"]) {
    const std::string dir = GoldenDir() + "/helpers_units/" + e["name"].get<std::string>();
    std::vector<double> raw;
    for (const auto& v : e["raw_weights"]) raw.push_back(v.get<double>());
    auto t = BuildBlendingIndices(Normalize(raw), e["size"]);
    std::vector<int16_t> di(t.dataset_index.begin(), t.dataset_index.end());
    ExpectNpyEquals(dir + "/dataset_index.npy", di, {e["size"].get<int64_t>()});
    ExpectNpyEquals(dir + "/dataset_sample_index.npy", t.dataset_sample_index,
                    {e["size"].get<int64_t>()});
  }
  for (const auto& e : Units()["build_exhaustive_blending_indices"]) {
    const std::string dir = GoldenDir() + "/helpers_units/" + e["name"].get<std::string>();
    auto t = BuildExhaustiveBlendingIndices(e["sizes"].get<std::vector<int64_t>>());
    std::vector<int16_t> di(t.dataset_index.begin(), t.dataset_index.end());
    const int64_t n = static_cast<int64_t>(di.size());
    ExpectNpyEquals(dir + "/dataset_index.npy", di, {n});
    ExpectNpyEquals(dir + "/dataset_sample_index.npy", t.dataset_sample_index, {n});
  }
}

template <typename T>
std::vector<T> Shuffled(NumpyRandomState& rng, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(i);
  rng.Shuffle(std::span<T>(v));
  return v;
}

TEST(GoldenRandom, NumpyShuffles) {
  const std::string dir = GoldenDir() + "/helpers_units/numpy_shuffle/";
  int chains = 0;
  for (const auto& e : Units()["numpy_randomstate_shuffle"]) {
    if (e.contains("chain")) {
      // Successive shuffles on one RandomState, as the document and shuffle index builders do.
      NumpyRandomState rng(e["seed"].get<uint32_t>());
      static const std::regex re(R"(np_chain_seed\d+_(first|second)_(int32|uint32)_n(\d+)\.npy)");
      for (const auto& f : e["chain"]) {
        std::smatch m;
        const std::string file = f.get<std::string>();
        ASSERT_TRUE(std::regex_match(file, m, re)) << file;
        const int64_t n = std::stoll(m[3]);
        if (m[2] == "int32")
          ExpectNpyEquals(dir + file, Shuffled<int32_t>(rng, n), {n});
        else
          ExpectNpyEquals(dir + file, Shuffled<uint32_t>(rng, n), {n});
      }
      ++chains;
      continue;
    }
    const std::string file = e["file"];
    const int64_t n = e["n"];
    NumpyRandomState rng(e["seed"].get<uint32_t>());
    if (e["dtype"] == "int64")
      ExpectNpyEquals(dir + file, Shuffled<int64_t>(rng, n), {n});
    else if (e["dtype"] == "uint32")
      ExpectNpyEquals(dir + file, Shuffled<uint32_t>(rng, n), {n});
    else
      ExpectNpyEquals(dir + file, Shuffled<int32_t>(rng, n), {n});
  }
  EXPECT_GE(chains, 1);
}

TEST(GoldenRandom, TorchRandperm) {
  const std::regex name_re(R"(torch_randperm_n(\d+)_seed(\d+)\.npy)");
  int found = 0;
  for (const auto& f : std::filesystem::directory_iterator(GoldenDir() + "/samplers/randperm")) {
    std::smatch m;
    const std::string name = f.path().filename().string();
    ASSERT_TRUE(std::regex_match(name, m, name_re)) << name;
    const int64_t n = std::stoll(m[1]);
    ExpectNpyEquals(f.path().string(), TorchRandperm(n, std::stoull(m[2])), {n});
    ++found;
  }
  EXPECT_GE(found, 5);
}

const json& Samplers() {
  static const json j = ReadJson(GoldenDir() + "/samplers/samplers.json");
  return j;
}

TEST(GoldenSamplers, Pretraining) {
  for (const auto& e : Samplers()["pretraining_sampler"]) {
    const std::string dir = GoldenDir() + "/samplers/" + e["name"].get<std::string>();
    const int64_t dp = e["data_parallel_size"];
    for (int64_t r = 0; r < dp; ++r) {
      SCOPED_TRACE(dir + " rank " + std::to_string(r));
      ScheduleOptions so;
      so.type = DataloaderType::kSingle;
      so.total_samples = e["total_samples"];
      so.start_consumed = e["consumed_samples"];
      so.micro_batch_size = e["micro_batch_size"];
      so.dp_size = dp;
      so.drop_last = e["drop_last"];
      auto schedule = ReadSchedule::Create(so);
      ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
      auto walker = schedule->Walk(r);
      std::vector<std::vector<int64_t>> batches;
      for (StepBatch b; walker.Next(&b);) batches.push_back(b.positions);
      const auto& info = e["ranks"][std::to_string(r)];
      EXPECT_EQ(static_cast<int64_t>(batches.size()), info["num_batches_total"].get<int64_t>());
      EXPECT_EQ(schedule->num_steps(), info["num_batches_total"].get<int64_t>());
      const int64_t stored = info["num_batches_stored"];
      std::vector<int64_t> flat, lengths;
      for (int64_t k = 0; k < stored; ++k) {
        flat.insert(flat.end(), batches[k].begin(), batches[k].end());
        lengths.push_back(static_cast<int64_t>(batches[k].size()));
      }
      const std::string p = dir + "/rank" + std::to_string(r);
      ExpectNpyEquals(p + "_flat.npy", flat, {static_cast<int64_t>(flat.size())});
      ExpectNpyEquals(p + "_batch_lengths.npy", lengths, {stored});
    }
  }
}

TEST(GoldenSamplers, RandomCyclic) {
  for (const auto& e : Samplers()["random_sampler"]) {
    const std::string dir = GoldenDir() + "/samplers/" + e["name"].get<std::string>();
    const int64_t dp = e["data_parallel_size"];
    for (int64_t r = 0; r < dp; ++r) {
      SCOPED_TRACE(dir + " rank " + std::to_string(r));
      ScheduleOptions so;
      so.type = DataloaderType::kCyclic;
      so.total_samples = e["total_samples"];
      so.start_consumed = e["consumed_samples"];
      so.micro_batch_size = e["micro_batch_size"];
      so.dp_size = dp;
      so.data_sharding = e["data_sharding"];
      auto schedule = ReadSchedule::Create(so);
      ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
      auto walker = schedule->Walk(r);
      const auto& info = e["ranks"][std::to_string(r)];
      const int64_t stored = info["num_batches_stored"];
      std::vector<int64_t> flat, lengths, epochs, consumed;
      StepBatch b;
      for (int64_t k = 0; k < stored; ++k) {
        ASSERT_TRUE(walker.Next(&b));
        flat.insert(flat.end(), b.positions.begin(), b.positions.end());
        lengths.push_back(static_cast<int64_t>(b.positions.size()));
        epochs.push_back(b.epoch);
        consumed.push_back(b.consumed_before);
      }
      EXPECT_EQ(b.consumed_before + schedule->samples_per_step(),
                info["final_consumed_samples"].get<int64_t>());
      const std::string p = dir + "/rank" + std::to_string(r);
      ExpectNpyEquals(p + "_flat.npy", flat, {static_cast<int64_t>(flat.size())});
      ExpectNpyEquals(p + "_batch_lengths.npy", lengths, {stored});
      ExpectNpyEquals(p + "_epoch.npy", epochs, {stored});
      ExpectNpyEquals(p + "_consumed_before.npy", consumed, {stored});
    }
  }
}

TEST(GoldenCp, ZigzagEveryRank) {
  const std::string dir = GoldenDir() + "/cp_zigzag";
  const json cp = ReadJson(dir + "/cp.json");
  auto tokens = io::ReadNpy(dir + "/input/tokens.npy").value();
  const int64_t mbs = tokens.shape[0], L = tokens.shape[1];
  auto labels = io::ReadNpy(dir + "/input/labels.npy")->As<int64_t>();
  auto pos = io::ReadNpy(dir + "/input/position_ids.npy")->As<int64_t>();
  auto loss = io::ReadNpy(dir + "/input/loss_mask.npy")->As<float>();
  auto mask = io::ReadNpy(dir + "/input/attention_mask.npy")->As<uint8_t>();
  int checked = 0;
  for (const auto& [name, files] : cp["outputs"].items()) {
    std::smatch m;
    static const std::regex re(R"(cp(\d+)_rank(\d+))");
    ASSERT_TRUE(std::regex_match(name, m, re));
    const int64_t c = std::stoll(m[1]), r = std::stoll(m[2]);
    const std::string od = dir + "/" + name;
    const int64_t local = L / c;
    ExpectNpyEquals(od + "/tokens.npy", CpZigzagSlice(tokens.As<int64_t>(), mbs, L, 1, c, r),
                    {mbs, local});
    ExpectNpyEquals(od + "/labels.npy", CpZigzagSlice(labels, mbs, L, 1, c, r), {mbs, local});
    ExpectNpyEquals(od + "/position_ids.npy", CpZigzagSlice(pos, mbs, L, 1, c, r), {mbs, local});
    ExpectNpyEquals(od + "/loss_mask.npy", CpZigzagSlice(loss, mbs, L, 1, c, r), {mbs, local});
    ExpectNpyEquals(od + "/attention_mask.npy", CpZigzagSlice(mask, mbs, L, L, c, r),
                    {mbs, 1, local, L});
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

}  // namespace
}  // namespace gridfeed::order
