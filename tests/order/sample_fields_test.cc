// AssembleFields and AssembleSample against the reference assembly (reference_sample.h) over
// random corpora, tables and options: every field subset a pipeline stage asks for, every CP
// slice, partial samples, pad and EOD ids that collide with tokens and with each other.
#include "gridfeed/order/sample_fields.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gridfeed/io/indexed_dataset_builder.h"
#include "gridfeed/order/cp_zigzag.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/megatron/megatron_pipeline.h"
#include "order/reference_sample.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

// A token store and hand-made tables over it, laid out by Megatron's sample_index rule but with
// some samples cut short (as a partial last sample is).
struct Corpus {
  std::unique_ptr<io::IndexedDataset> ds;
  std::vector<int32_t> document_index, sample_index;
  std::vector<uint32_t> shuffle_index;
  GptTablesView View() const {
    GptTablesView v;
    v.document_index = document_index;
    v.sample_index32 = sample_index;
    v.shuffle_index32 = shuffle_index;
    return v;
  }
};

Corpus MakeCorpus(const std::string& prefix, io::DType dtype, int64_t S, int64_t x,
                  std::mt19937_64& rng) {
  Corpus c;
  const bool is_signed = dtype == io::DType::kInt8 || dtype == io::DType::kInt16 ||
                         dtype == io::DType::kInt32 || dtype == io::DType::kInt64;
  const int64_t large = dtype == io::DType::kUInt8   ? 250
                        : dtype == io::DType::kInt8  ? 120
                        : dtype == io::DType::kInt16 ? 30000
                                                     : 60000;
  auto b = io::IndexedDatasetBuilder::Create(prefix, dtype).value();
  std::vector<int64_t> lengths;
  for (int s = 0; s < 30; ++s) {
    std::vector<int64_t> seq(1 + rng() % (rng() % 4 == 0 ? 3 : 3 * S));
    for (auto& t : seq) {
      // Mostly small ids, so EOD and pad ids turn up often; some large, some negative.
      t = rng() % 8 == 0 ? int64_t(rng() % uint64_t(large)) : int64_t(rng() % 8);
      if (is_signed && rng() % 16 == 0) t = -1 - int64_t(rng() % 2);
    }
    lengths.push_back(static_cast<int64_t>(seq.size()));
    EXPECT_TRUE(b.AddItem(seq).ok());
    b.EndDocument();
  }
  EXPECT_TRUE(b.Finalize().ok());
  c.ds = std::make_unique<io::IndexedDataset>(io::IndexedDataset::Open(prefix).value());
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int32_t> perm(lengths.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    c.document_index.insert(c.document_index.end(), perm.begin(), perm.end());
  }
  // Megatron's build_sample_idx, with `want` tokens (S, or fewer) per sample.
  int64_t d = 0, offset = 0;
  const auto docs = static_cast<int64_t>(c.document_index.size());
  c.sample_index = {0, 0};
  while (true) {
    int64_t remaining = (rng() % 4 == 0 ? 1 + int64_t(rng() % S) : S) + x;
    while (remaining != 0 && d < docs) {
      const int64_t doc_length = lengths[static_cast<size_t>(c.document_index[d])] - offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        offset += remaining + doc_length - x;
        remaining = 0;
      } else {
        ++d;
        offset = 0;
      }
    }
    if (d >= docs) break;
    c.sample_index.push_back(static_cast<int32_t>(d));
    c.sample_index.push_back(static_cast<int32_t>(offset));
  }
  c.shuffle_index.resize(c.sample_index.size() / 2 - 1);
  std::iota(c.shuffle_index.begin(), c.shuffle_index.end(), 0u);
  std::shuffle(c.shuffle_index.begin(), c.shuffle_index.end(), rng);
  return c;
}

// The field sets a stage asks for (first: inputs; last: targets; one stage: both), and each
// field alone.
enum Set { kAll, kFirst, kLast, kTokens, kPositions, kLabels, kLoss, kMask, kSets };

struct Buffers {
  std::vector<int64_t> tokens, positions, labels;
  std::vector<float> loss;
  std::vector<uint8_t> mask;
};

FieldTargets TargetsFor(Set set, int64_t L, int64_t S, Buffers* b) {
  auto wants = [&](Set field) {
    return set == kAll || set == field ||
           (set == kFirst && (field == kTokens || field == kPositions || field == kMask)) ||
           (set == kLast && (field == kLabels || field == kLoss));
  };
  // Sentinels, so an element left unwritten shows.
  const auto n = static_cast<size_t>(L);
  b->tokens.assign(n, -7);
  b->positions.assign(n, -7);
  b->labels.assign(n, -7);
  b->loss.assign(n, -7.0f);
  b->mask.assign(n * static_cast<size_t>(S), 7);
  FieldTargets t;
  t.tokens = wants(kTokens) ? b->tokens.data() : nullptr;
  t.position_ids = wants(kPositions) ? b->positions.data() : nullptr;
  t.labels = wants(kLabels) ? b->labels.data() : nullptr;
  t.loss_mask = wants(kLoss) ? b->loss.data() : nullptr;
  t.attention_mask = wants(kMask) ? b->mask.data() : nullptr;
  return t;
}

template <typename T>
void ExpectSlice(const std::vector<T>& whole, int64_t S, int64_t inner, int64_t cp, int64_t rank,
                 const std::vector<T>& got, const char* field) {
  // Without CP the whole field (CpZigzagSlice would drop the last position of an odd S).
  const std::vector<T> want = cp == 1 ? whole : CpZigzagSlice(whole, 1, S, inner, cp, rank);
  ASSERT_EQ(want.size(), got.size()) << field;
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(T))) << field;
}

TEST(SampleFields, EqualTheReferenceForEveryStageSliceAndOption) {
  const std::string dir = testing::ScratchDir("sample_fields");
  std::mt19937_64 rng(20240614);
  // Every integer store type (each has its own path), and a float one (the general path).
  const io::DType dtypes[] = {io::DType::kUInt16, io::DType::kInt32, io::DType::kInt64,
                              io::DType::kUInt8,  io::DType::kInt8,  io::DType::kInt16,
                              io::DType::kFloat32};
  const int64_t lengths[] = {7, 8, 12, 16, 24, 64};
  AssemblyScratch scratch;  // shared by every case: reuse across lengths must not leak
  int64_t samples = 0, masks = 0;
  for (int round = 0; round < 70; ++round) {
    const io::DType dtype = dtypes[round % 7];
    const int64_t S = lengths[rng() % 6];
    SampleOptions o;
    o.seq_length = S;
    o.add_extra_token = rng() % 3 != 0;
    o.eod_id = rng() % 2 == 0 ? 0 : 3;
    const int64_t pads[] = {-1, 0, 3, 5};
    o.pad_id = pads[rng() % 4];  // 0 or 3 may equal the EOD id (no PadIdUsed here)
    o.reset_position_ids = rng() % 2;
    o.reset_attention_mask = rng() % 2;
    o.eod_mask_loss = rng() % 2;
    o.create_attention_mask = rng() % 3 == 0;
    const Corpus c =
        MakeCorpus(dir + "/c" + std::to_string(round), dtype, S, o.add_extra_token ? 1 : 0, rng);
    const GptTablesView view = c.View();
    for (int64_t i = 0; i < view.num_samples(); ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + " S " + std::to_string(S) + " sample " +
                   std::to_string(i));
      Sample ref, got;
      testing::ReferenceAssembleSample(*c.ds, view, i, o, &ref);
      AssembleSample(*c.ds, view, i, o, &got);
      EXPECT_EQ(ref.tokens, got.tokens);
      EXPECT_EQ(ref.labels, got.labels);
      EXPECT_EQ(ref.loss_mask, got.loss_mask);
      EXPECT_EQ(ref.position_ids, got.position_ids);
      EXPECT_EQ(ref.attention_mask, got.attention_mask);
      ++samples;
      masks += o.create_attention_mask;
      for (int64_t cp : {1, 2, 4}) {
        if (cp > 1 && S % (2 * cp) != 0) continue;
        for (int64_t rank = 0; rank < cp; ++rank) {
          for (int set = 0; set < kSets; ++set) {
            SCOPED_TRACE("cp " + std::to_string(cp) + " rank " + std::to_string(rank) + " set " +
                         std::to_string(set));
            Buffers b;
            FieldTargets t = TargetsFor(static_cast<Set>(set), S / cp, S, &b);
            t.cp_size = cp;
            t.cp_rank = rank;
            AssembleFields(*c.ds, view, i, o, t, &scratch);
            if (t.tokens) ExpectSlice(ref.tokens, S, 1, cp, rank, b.tokens, "tokens");
            if (t.position_ids) {
              ExpectSlice(ref.position_ids, S, 1, cp, rank, b.positions, "position_ids");
            }
            if (t.labels) ExpectSlice(ref.labels, S, 1, cp, rank, b.labels, "labels");
            if (t.loss_mask) ExpectSlice(ref.loss_mask, S, 1, cp, rank, b.loss, "loss_mask");
            if (t.attention_mask && o.create_attention_mask) {
              ExpectSlice(ref.attention_mask, S, S, cp, rank, b.mask, "attention_mask");
            }
            // What a whole sample sliced afterwards gives (the path of other orders).
            Buffers sliced;
            FieldTargets u = TargetsFor(static_cast<Set>(set), S / cp, S, &sliced);
            u.cp_size = cp;
            u.cp_rank = rank;
            SliceFields(ref, S, u);
            EXPECT_EQ(b.tokens, sliced.tokens);
            EXPECT_EQ(b.positions, sliced.positions);
            EXPECT_EQ(b.labels, sliced.labels);
            EXPECT_EQ(b.loss, sliced.loss);
            EXPECT_EQ(b.mask, sliced.mask);
          }
        }
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
  // The random cases reached what they are meant to cover.
  EXPECT_GT(samples, 1000);
  EXPECT_GT(masks, 100);
}

// Megatron's ReadFields (in place, CP slices hashed whole) against OrderView's default, which
// reads the whole sample with Read and slices it: the same fields and the same record.
TEST(SampleFields, MegatronReadFieldsEqualsReadThenSlice) {
  const std::string prefix = testing::ScratchDir("read_fields") + "/corpus";
  std::mt19937_64 rng(7);
  {
    auto b = io::IndexedDatasetBuilder::Create(prefix, io::DType::kUInt16).value();
    for (int d = 0; d < 200; ++d) {
      std::vector<int64_t> doc(1 + rng() % 90);
      for (auto& t : doc) t = 1 + int64_t(rng() % 1000);
      doc.back() = 0;
      ASSERT_TRUE(b.AddItem(doc).ok());
      b.EndDocument();
    }
    ASSERT_TRUE(b.Finalize().ok());
  }
  DatasetConfig c;
  c.data_path = std::vector<std::string>{prefix};
  c.split = "100,0,0";
  c.seq_length = 32;
  c.seed = 5;
  SampleOptions o;
  o.seq_length = 32;
  o.reset_position_ids = true;
  o.eod_mask_loss = true;
  auto built = MakeMegatronBuilt(BuildDatasets(c).value(), o);
  const OrderView& view = built->view();
  AssemblyScratch fast, slow;
  for (int64_t p = 0; p < view.length(Split::kTrain); ++p) {
    for (int64_t cp : {1, 2, 4}) {
      for (int set : {kAll, kFirst, kLast}) {
        for (bool hash : {false, true}) {
          SCOPED_TRACE("position " + std::to_string(p) + " cp " + std::to_string(cp) + " set " +
                       std::to_string(set) + " hash " + std::to_string(hash));
          const int64_t rank = p % cp;
          Buffers a, b;
          FieldTargets ta = TargetsFor(static_cast<Set>(set), 32 / cp, 32, &a);
          FieldTargets tb = TargetsFor(static_cast<Set>(set), 32 / cp, 32, &b);
          ta.cp_size = tb.cp_size = cp;
          ta.cp_rank = tb.cp_rank = rank;
          const SampleRecord ra = view.ReadFields(Split::kTrain, p, ta, hash, &fast);
          const SampleRecord rb = view.OrderView::ReadFields(Split::kTrain, p, tb, hash, &slow);
          EXPECT_EQ(ra, rb);
          EXPECT_EQ(hash, ra.token_xxh3 != 0);
          EXPECT_EQ(a.tokens, b.tokens);
          EXPECT_EQ(a.positions, b.positions);
          EXPECT_EQ(a.labels, b.labels);
          EXPECT_EQ(a.loss, b.loss);
        }
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace gridfeed::order
