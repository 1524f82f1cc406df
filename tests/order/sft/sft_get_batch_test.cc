// The trainer side of Megatron's packed SFT micro-batches (thd.h) against the golden get_batch
// probes and every dataset batch of GRIDFEED_SFT_GOLDEN_DIR, plus TE's partition rules by hand.
// Folders are listed at run time, so another golden set with other probes works unchanged: the
// environment variable GRIDFEED_SFT_GOLDEN_DIR, when set, replaces the compiled-in folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/io/npy.h"
#include "gridfeed/order/sft/thd.h"

namespace gridfeed::order::sft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path GoldenRoot() {
  const char* env = std::getenv("GRIDFEED_SFT_GOLDEN_DIR");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(GRIDFEED_SFT_GOLDEN_DIR);
}
const fs::path kGolden = GoldenRoot();
const char* const kFields[] = {"tokens",       "labels",     "loss_mask",
                               "position_ids", "cu_seqlens", "max_seqlen"};

std::vector<fs::path> SortedSubdirs(const fs::path& dir, const std::string& prefix = "") {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind(prefix, 0) == 0) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<io::NpyArray> LoadNpy(const fs::path& path) {
  auto r = io::ReadNpy(path.string());
  if (!r.ok()) {
    ADD_FAILURE() << path << ": " << r.status().ToString();
    return std::nullopt;
  }
  return std::move(r).value();
}

template <typename T>
io::NpyArray MakeArray(const std::vector<T>& values, std::vector<int64_t> shape) {
  io::NpyArray a;
  a.descr = io::NpyDescr<T>();
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

// dtype, shape and every byte of the payload.
void ExpectSameArray(const io::NpyArray& actual, const io::NpyArray& expected,
                     const std::string& what) {
  EXPECT_EQ(actual.descr, expected.descr) << what;
  EXPECT_EQ(actual.shape, expected.shape) << what;
  ASSERT_EQ(actual.data.size(), expected.data.size()) << what;
  const auto mismatch =
      std::mismatch(actual.data.begin(), actual.data.end(), expected.data.begin());
  EXPECT_TRUE(mismatch.first == actual.data.end())
      << what << ": first differing byte at offset " << (mismatch.first - actual.data.begin());
}

// The batch's field as the tensor Megatron holds: [mbs, L] sequences, [mbs, cu_width] cu_seqlens,
// [mbs] max_seqlen. nullopt for a field the batch does not hold (None).
std::optional<io::NpyArray> FieldArray(const PackedMicroBatch& b, const std::string& field) {
  const std::vector<int64_t> seq_shape = {b.mbs, b.seq_length};
  if (field == "tokens" && !b.tokens.empty()) return MakeArray(b.tokens, seq_shape);
  if (field == "labels" && !b.labels.empty()) return MakeArray(b.labels, seq_shape);
  if (field == "loss_mask" && !b.loss_mask.empty()) return MakeArray(b.loss_mask, seq_shape);
  if (field == "position_ids" && !b.position_ids.empty()) {
    return MakeArray(b.position_ids, seq_shape);
  }
  if (field == "cu_seqlens" && !b.cu_seqlens.empty()) {
    return MakeArray(b.cu_seqlens, {b.mbs, b.cu_width});
  }
  if (field == "max_seqlen" && !b.max_seqlen.empty()) return MakeArray(b.max_seqlen, {b.mbs});
  return std::nullopt;
}

template <typename T>
bool Take(const fs::path& dir, const std::string& field, std::vector<T>* out,
          std::vector<int64_t>* shape) {
  const fs::path path = dir / (field + ".npy");
  if (!fs::exists(path)) return false;
  auto a = LoadNpy(path);
  if (!a) return false;
  EXPECT_TRUE(a->Is<T>()) << path << " has dtype " << a->descr;
  *out = a->As<T>();
  *shape = a->shape;
  return true;
}

// Reads a micro-batch folder (fields missing from it are None).
PackedMicroBatch LoadBatch(const fs::path& dir) {
  PackedMicroBatch b;
  std::vector<int64_t> shape;
  auto seq_shape = [&](const char* field) {
    EXPECT_EQ(shape.size(), 2u) << dir << " " << field;
    if (shape.size() == 2) {
      b.mbs = shape[0];
      b.seq_length = shape[1];
    }
  };
  if (Take(dir, "tokens", &b.tokens, &shape)) seq_shape("tokens");
  if (Take(dir, "labels", &b.labels, &shape)) seq_shape("labels");
  if (Take(dir, "loss_mask", &b.loss_mask, &shape)) seq_shape("loss_mask");
  if (Take(dir, "position_ids", &b.position_ids, &shape)) seq_shape("position_ids");
  if (Take(dir, "cu_seqlens", &b.cu_seqlens, &shape)) {
    EXPECT_EQ(shape.size(), 2u) << dir << " cu_seqlens";
    if (shape.size() == 2) {
      b.mbs = shape[0];
      b.cu_width = shape[1];
    }
  }
  if (Take(dir, "max_seqlen", &b.max_seqlen, &shape)) {
    EXPECT_EQ(shape, std::vector<int64_t>{b.mbs}) << dir << " max_seqlen";
  }
  return b;
}

// Every field the batch holds equals dir/<field>.npy, and every field it lacks has no file
// there; `manifest` (probe.json's listing of dir, if any) must agree: "<field>.npy" or null.
void ExpectBatchEqualsDir(const PackedMicroBatch& b, const fs::path& dir,
                          const json* manifest = nullptr) {
  for (const std::string field : kFields) {
    const fs::path path = dir / (field + ".npy");
    const auto actual = FieldArray(b, field);
    if (manifest != nullptr) {
      const bool listed = manifest->contains(field + ".npy");
      EXPECT_EQ(listed, actual.has_value()) << dir << " " << field << " (probe.json)";
      if (!listed) {
        EXPECT_TRUE(manifest->contains(field) && (*manifest)[field].is_null())
            << dir << " " << field << " neither listed nor null in probe.json";
      }
    }
    if (!actual) {
      EXPECT_FALSE(fs::exists(path)) << path << " exists but the batch holds no " << field;
      continue;
    }
    if (!fs::exists(path)) {
      ADD_FAILURE() << path << " missing but the batch holds " << field;
      continue;
    }
    if (auto expected = LoadNpy(path)) ExpectSameArray(*actual, *expected, path.string());
  }
}

StageKind ParseStage(const std::string& s) {
  if (s == "only") return StageKind::kOnly;
  if (s == "first") return StageKind::kFirst;
  if (s == "last") return StageKind::kLast;
  EXPECT_EQ(s, "middle") << "unknown stage";
  return StageKind::kMiddle;
}

// What a TP rank holds after the broadcast: the fields the plan sends, nothing else.
PackedMicroBatch Received(const PackedMicroBatch& src, const std::vector<BroadcastMessage>& plan) {
  PackedMicroBatch b;
  b.mbs = src.mbs;
  b.seq_length = src.seq_length;
  for (const auto& m : plan) {
    if (m.kind != BroadcastMessage::Kind::kField) continue;
    if (m.field == "tokens") b.tokens = src.tokens;
    if (m.field == "labels") b.labels = src.labels;
    if (m.field == "loss_mask") b.loss_mask = src.loss_mask;
    if (m.field == "position_ids") b.position_ids = src.position_ids;
    if (m.field == "cu_seqlens") {
      b.cu_seqlens = src.cu_seqlens;
      b.cu_width = src.cu_width;
    }
    if (m.field == "max_seqlen") b.max_seqlen = src.max_seqlen;
  }
  return b;
}

std::string MsgName(size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "msg_%02zu.npy", i);
  return buf;
}

size_t CountFiles(const fs::path& dir, const std::string& prefix) {
  size_t n = 0;
  if (!fs::is_directory(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

void CheckProbe(const fs::path& dir) {
  std::ifstream in(dir / "probe.json");
  ASSERT_TRUE(in) << dir / "probe.json";
  const json probe = json::parse(in);
  const json& config = probe.at("config");
  const StageKind stage = ParseStage(config.at("stage").get<std::string>());
  const auto cp = config.at("cp").get<int64_t>();

  const PackedMicroBatch src = LoadBatch(kGolden / probe.at("source").get<std::string>());
  ASSERT_EQ(src.mbs, config.at("micro_batch_size").get<int64_t>());
  ASSERT_EQ(src.seq_length, config.at("seq_length").get<int64_t>());

  // (1) The broadcast: one message per plan entry, each equal to msg_XX.npy.
  const std::vector<BroadcastMessage> plan = SftBroadcastPlan(stage, cp);
  const json& messages = probe.at("messages");
  ASSERT_EQ(plan.size(), messages.size());
  ASSERT_EQ(plan.size(), CountFiles(dir / "broadcast", "msg_"));
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::string what = (dir / "broadcast" / MsgName(i)).string() + " (" +
                             (plan[i].kind == BroadcastMessage::Kind::kNumel ? "numel " : "") +
                             plan[i].field + ")";
    std::optional<io::NpyArray> actual;
    if (plan[i].kind == BroadcastMessage::Kind::kNumel) {
      const auto field = FieldArray(src, plan[i].field);
      const int64_t numel = field ? field->num_elements() : 0;  // 0 announces None
      actual = MakeArray(std::vector<int64_t>{numel}, {});
    } else {
      actual = FieldArray(src, plan[i].field);
      if (!actual) {
        ADD_FAILURE() << what << ": the plan sends a field the source batch lacks";
        continue;
      }
    }
    EXPECT_EQ(actual->descr, messages[i].at("dtype").get<std::string>()) << what;
    EXPECT_EQ(actual->shape, messages[i].at("shape").get<std::vector<int64_t>>()) << what;
    if (auto expected = LoadNpy(dir / "broadcast" / MsgName(i))) {
      ExpectSameArray(*actual, *expected, what);
    }
  }

  // (2) What every TP rank holds.
  const PackedMicroBatch held = Received(src, plan);
  ExpectBatchEqualsDir(held, dir / "after_broadcast", &probe.at("after_broadcast"));

  // (3) Flattening.
  const PackedMicroBatch flat = FlattenPacked(held);
  ExpectBatchEqualsDir(flat, dir / "flattened", &probe.at("flattened"));

  // (4) The CP slices (absent for cp == 1 and for stages without sequence data).
  const auto rank_dirs = SortedSubdirs(dir, "cp_rank_");
  const json& partition = probe.at("cp_partition");
  if (partition.is_null()) {
    EXPECT_TRUE(rank_dirs.empty()) << dir;
    EXPECT_TRUE(cp == 1 || stage == StageKind::kMiddle) << dir << ": cp > 1 but no CP slices";
    return;
  }
  EXPECT_GT(cp, 1);
  const json& ranks = partition.at("ranks");
  ASSERT_EQ(ranks.size(), static_cast<size_t>(cp));
  ASSERT_EQ(rank_dirs.size(), static_cast<size_t>(cp));
  for (const json& entry : ranks) {
    const auto rank = entry.at("cp_rank").get<int64_t>();
    const fs::path rdir = dir / ("cp_rank_" + std::to_string(rank));
    SCOPED_TRACE(rdir.string());
    auto index = ThdPartitionedIndices(
        std::span<const int32_t>(flat.cu_seqlens.data(), static_cast<size_t>(flat.cu_width)),
        flat.mbs * flat.seq_length, cp, rank);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    if (auto expected = LoadNpy(rdir / "index.npy")) {
      const auto n = static_cast<int64_t>(index->size());
      ExpectSameArray(MakeArray(*index, {n}), *expected, (rdir / "index.npy").string());
    }
    auto sliced = SliceForCpRank(flat, cp, rank);
    ASSERT_TRUE(sliced.ok()) << sliced.status().ToString();
    ExpectBatchEqualsDir(*sliced, rdir, &entry.at("files"));
  }
}

TEST(SftGetBatchGolden, EveryProbe) {
  const auto probes = SortedSubdirs(kGolden / "get_batch");
  ASSERT_FALSE(probes.empty()) << "no probes under " << kGolden / "get_batch";
  // index.json, when present, names the probes: none may be missing on disk.
  if (std::ifstream idx(kGolden / "get_batch" / "index.json"); idx) {
    const json index = json::parse(idx);  // kept: a range-for over .at() of a temporary dangles
    for (const auto& name : index.at("probes")) {
      EXPECT_TRUE(fs::is_directory(kGolden / "get_batch" / name.get<std::string>())) << name;
    }
  }
  for (const auto& dir : probes) {
    SCOPED_TRACE(dir.string());
    CheckProbe(dir);
  }
  std::printf("[ info ] %zu get_batch probes compared\n", probes.size());
}

TEST(SftGetBatchGolden, EveryDatasetBatchFlattens) {
  std::vector<fs::path> micro_batches;
  if (fs::is_directory(kGolden / "cases")) {
    for (const auto& e : fs::recursive_directory_iterator(kGolden / "cases")) {
      if (e.is_directory() && e.path().filename() == "collated") {
        micro_batches.push_back(e.path().parent_path());
      }
    }
  }
  std::sort(micro_batches.begin(), micro_batches.end());
  ASSERT_FALSE(micro_batches.empty()) << "no collated micro-batches under " << kGolden / "cases";
  for (const auto& mb : micro_batches) {
    SCOPED_TRACE(mb.string());
    ASSERT_TRUE(fs::is_directory(mb / "flattened"));
    const PackedMicroBatch collated = LoadBatch(mb / "collated");
    ASSERT_GT(collated.mbs, 0);
    ExpectBatchEqualsDir(collated, mb / "collated");  // the loader reads back every field
    ExpectBatchEqualsDir(FlattenPacked(collated), mb / "flattened");
  }
  std::printf("[ info ] %zu dataset micro-batches flattened\n", micro_batches.size());
}

// ---- by hand ----

std::vector<int32_t> Indices(std::vector<int32_t> cu, int64_t total, int64_t cp, int64_t rank) {
  auto r = ThdPartitionedIndices(cu, total, cp, rank);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<int32_t>{};
}

TEST(ThdPartitionedIndices, TransformerEngineExample) {
  EXPECT_EQ(Indices({0, 8, 16}, 16, 2, 0), (std::vector<int32_t>{0, 1, 6, 7, 8, 9, 14, 15}));
  EXPECT_EQ(Indices({0, 8, 16}, 16, 2, 1), (std::vector<int32_t>{2, 3, 4, 5, 10, 11, 12, 13}));
}

TEST(ThdPartitionedIndices, CpFourUnevenSequences) {
  // Sequences of 8 and 16, 8 chunks each: rank r takes chunks r and 7-r.
  EXPECT_EQ(Indices({0, 8, 24}, 24, 4, 1), (std::vector<int32_t>{1, 6, 10, 11, 20, 21}));
  EXPECT_EQ(Indices({0, 8, 24}, 24, 4, 3), (std::vector<int32_t>{3, 4, 14, 15, 16, 17}));
}

TEST(ThdPartitionedIndices, ZeroLengthTrailingSequence) {
  // cu [0, L, L] (what flattening keeps of a row padded with L) partitions like [0, L].
  EXPECT_EQ(Indices({0, 16, 16}, 16, 2, 0), (std::vector<int32_t>{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(Indices({0, 16, 16}, 16, 2, 1), (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(Indices({0, 16, 16}, 16, 2, 0), Indices({0, 16}, 16, 2, 0));
}

TEST(ThdPartitionedIndices, PositionsBeyondLastBoundaryUseLastSequence) {
  // cu covers 8 of 16 positions: local positions 4..7 resolve to sequence 0 (n = 4 per rank)
  // and land in its back-chunk arithmetic, continuing past its end.
  EXPECT_EQ(Indices({0, 8}, 16, 2, 0), (std::vector<int32_t>{0, 1, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(Indices({0, 8}, 16, 2, 1), (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8, 9}));
  // With a zero-length last sequence they resolve to it (n = 0): index = cu[1] + (t - cs[1]).
  EXPECT_EQ(Indices({0, 8, 8}, 32, 2, 0),
            (std::vector<int32_t>{0, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
}

TEST(ThdPartitionedIndices, RejectsWhatTransformerEngineRejects) {
  auto invalid = [](std::vector<int32_t> cu, int64_t total, int64_t cp, int64_t rank) {
    auto r = ThdPartitionedIndices(cu, total, cp, rank);
    return !r.ok() && r.status().code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(invalid({}, 16, 2, 0));
  EXPECT_TRUE(invalid({0}, 16, 2, 0));         // fewer than 2 entries
  EXPECT_TRUE(invalid({0, 16}, 16, 2, -1));    // rank < 0
  EXPECT_TRUE(invalid({0, 16}, 16, 2, 2));     // rank >= cp
  EXPECT_TRUE(invalid({0, 16}, 16, 0, 0));     // cp 0
  EXPECT_TRUE(invalid({0, 16}, 0, 2, 0));      // total 0
  EXPECT_TRUE(invalid({0, 16}, -8, 2, 0));     // total < 0
  EXPECT_TRUE(invalid({0, 6}, 6, 2, 0));       // total not divisible by 2*cp
  EXPECT_TRUE(invalid({0, 6, 16}, 16, 2, 0));  // an entry not divisible by 2*cp
  EXPECT_TRUE(invalid({0, 16, 18}, 24, 2, 1));
  EXPECT_FALSE(invalid({0, 16}, 16, 2, 1));
  EXPECT_FALSE(invalid({0, 16}, 16, 1, 0));
}

PackedMicroBatch SyntheticFlat(int64_t total, std::vector<int32_t> cu) {
  PackedMicroBatch b;
  b.mbs = 1;
  b.seq_length = total;
  for (int64_t i = 0; i < total; ++i) {
    b.tokens.push_back(100 + i);
    b.labels.push_back(200 + i);
    b.loss_mask.push_back(static_cast<float>(i) / 2);
    b.position_ids.push_back(i % 5);
  }
  b.cu_width = static_cast<int64_t>(cu.size());
  b.cu_seqlens = std::move(cu);
  b.max_seqlen = {8};
  return b;
}

TEST(SliceForCpRank, IndexSelectsEverySequenceField) {
  const PackedMicroBatch flat = SyntheticFlat(16, {0, 8, 16});
  auto r = SliceForCpRank(flat, 2, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<int32_t> index = {2, 3, 4, 5, 10, 11, 12, 13};
  EXPECT_EQ(r->mbs, 1);
  EXPECT_EQ(r->seq_length, 8);
  ASSERT_EQ(r->tokens.size(), index.size());
  ASSERT_EQ(r->labels.size(), index.size());
  ASSERT_EQ(r->loss_mask.size(), index.size());
  ASSERT_EQ(r->position_ids.size(), index.size());
  for (size_t k = 0; k < index.size(); ++k) {
    EXPECT_EQ(r->tokens[k], 100 + index[k]);
    EXPECT_EQ(r->labels[k], 200 + index[k]);
    EXPECT_EQ(r->loss_mask[k], static_cast<float>(index[k]) / 2);
    EXPECT_EQ(r->position_ids[k], index[k] % 5);
  }
  EXPECT_EQ(r->cu_seqlens, flat.cu_seqlens);  // stays global
  EXPECT_EQ(r->max_seqlen, flat.max_seqlen);
}

TEST(SliceForCpRank, CpOneIsIdentity) {
  const PackedMicroBatch flat = SyntheticFlat(12, {0, 5, 12});  // not divisible: never checked
  auto r = SliceForCpRank(flat, 1, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tokens, flat.tokens);
  EXPECT_EQ(r->seq_length, 12);
  EXPECT_EQ(r->cu_seqlens, flat.cu_seqlens);
}

TEST(SliceForCpRank, ErrorsPropagateAndOutOfRangeIndicesAreRefused) {
  EXPECT_FALSE(SliceForCpRank(SyntheticFlat(16, {0, 6, 16}), 2, 0).ok());
  EXPECT_FALSE(SliceForCpRank(SyntheticFlat(16, {0, 16}), 2, 2).ok());
  // cu reaching past the tensor: TE returns 14..17 for rank 1, index_select would raise.
  EXPECT_EQ(Indices({0, 8, 32}, 16, 2, 1), (std::vector<int32_t>{2, 3, 4, 5, 14, 15, 16, 17}));
  auto r = SliceForCpRank(SyntheticFlat(16, {0, 8, 32}), 2, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(SliceForCpRank(SyntheticFlat(16, {0, 8, 32}), 2, 0).ok());
}

TEST(FlattenPacked, CutsRowsAtFirstLAndOffsets) {
  PackedMicroBatch b;
  b.mbs = 3;
  b.seq_length = 4;
  b.tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  b.loss_mask = {1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0};
  b.cu_width = 5;
  b.cu_seqlens = {0, 2, 4, 4, 4,   // cut after the first 4
                  0, 4, 4, 4, 4,   // one sequence, padding dropped
                  0, 1, 2, 3, 3};  // no entry equals L: kept whole
  b.max_seqlen = {2, 4, 1};
  const PackedMicroBatch f = FlattenPacked(b);
  EXPECT_EQ(f.mbs, 1);
  EXPECT_EQ(f.seq_length, 12);
  EXPECT_EQ(f.tokens, b.tokens);
  EXPECT_EQ(f.loss_mask, b.loss_mask);
  EXPECT_TRUE(f.labels.empty());
  EXPECT_TRUE(f.position_ids.empty());
  EXPECT_EQ(f.cu_seqlens, (std::vector<int32_t>{0, 2, 4, 8, 9, 10, 11, 11}));
  EXPECT_EQ(f.cu_width, 8);
  EXPECT_EQ(f.max_seqlen, (std::vector<int32_t>{4}));
}

TEST(FlattenPacked, ZeroLengthTrailingSequenceIsHidden) {
  // A pack ending exactly at L gives cu [0, L, L, ...]: flattening keeps [0, L].
  PackedMicroBatch b;
  b.mbs = 2;
  b.seq_length = 4;
  b.labels = {1, 2, 3, 4, 5, 6, 7, 8};
  b.cu_width = 5;
  b.cu_seqlens = {0, 4, 4, 4, 4, 0, 3, 4, 4, 4};
  b.max_seqlen = {4, 3};
  const PackedMicroBatch f = FlattenPacked(b);
  EXPECT_EQ(f.cu_seqlens, (std::vector<int32_t>{0, 4, 7, 8}));
  EXPECT_EQ(f.max_seqlen, (std::vector<int32_t>{4}));
}

TEST(FlattenPacked, MiddleStageTakesLFromCuSeqlens) {
  // No sequence tensors: L comes from cu_seqlens[0][-1], not from seq_length.
  PackedMicroBatch b;
  b.mbs = 2;
  b.seq_length = 99;
  b.cu_width = 4;
  b.cu_seqlens = {0, 2, 6, 6, 0, 6, 6, 6};
  b.max_seqlen = {4, 6};
  const PackedMicroBatch f = FlattenPacked(b);
  EXPECT_EQ(f.cu_seqlens, (std::vector<int32_t>{0, 2, 6, 12}));
  EXPECT_EQ(f.seq_length, 12);
  EXPECT_TRUE(f.tokens.empty());
}

std::vector<std::string> Describe(const std::vector<BroadcastMessage>& plan) {
  std::vector<std::string> out;
  for (const auto& m : plan) {
    out.push_back((m.kind == BroadcastMessage::Kind::kNumel ? "#" : "") + m.field);
  }
  return out;
}

TEST(SftBroadcastPlan, EveryStage) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Describe(SftBroadcastPlan(StageKind::kOnly, 1)),
            (V{"tokens", "labels", "loss_mask", "position_ids", "#cu_seqlens", "cu_seqlens",
               "max_seqlen"}));
  EXPECT_EQ(Describe(SftBroadcastPlan(StageKind::kFirst, 2)),
            (V{"tokens", "position_ids", "#cu_seqlens", "cu_seqlens", "max_seqlen",
               "#cu_seqlens_padded"}));
  EXPECT_EQ(Describe(SftBroadcastPlan(StageKind::kLast, 1)),
            (V{"labels", "loss_mask", "#cu_seqlens", "cu_seqlens", "max_seqlen"}));
  EXPECT_EQ(Describe(SftBroadcastPlan(StageKind::kMiddle, 1)),
            (V{"#cu_seqlens", "cu_seqlens", "max_seqlen"}));
  EXPECT_EQ(Describe(SftBroadcastPlan(StageKind::kMiddle, 4)),
            (V{"#cu_seqlens", "cu_seqlens", "max_seqlen", "#cu_seqlens_padded"}));
}

}  // namespace
}  // namespace gridfeed::order::sft
