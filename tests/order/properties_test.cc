// Seeded properties of the order core, independent of the golden vectors.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gridfeed/order/gpt_tables.h"
#include "gridfeed/order/megatron/table_files.h"
#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {
namespace {

std::vector<int32_t> RandomLengths(uint32_t seed, int n) {
  std::mt19937 g(seed);
  std::vector<int32_t> l(n);
  for (auto& x : l) x = 1 + static_cast<int32_t>(g() % 300);
  return l;
}

TEST(Properties, ShuffleIsAPermutation) {
  for (uint32_t seed : {0u, 1u, 99u}) {
    for (int64_t n : {0, 1, 2, 3, 100, 4097}) {
      NumpyRandomState rng(seed);
      std::vector<int64_t> v(n);
      std::iota(v.begin(), v.end(), 0);
      rng.Shuffle(std::span<int64_t>(v));
      std::vector<int64_t> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
    }
  }
  auto p = TorchRandperm(1000, 3);
  std::sort(p.begin(), p.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(p[i], i);
}

TEST(Properties, IntervalStaysInRange) {
  NumpyRandomState rng(7);
  for (uint64_t max : {1ull, 2ull, 5ull, 1000ull, 0xffffffffull, 0x100000000ull, 1ull << 40}) {
    for (int i = 0; i < 200; ++i) ASSERT_LE(rng.Interval(max), max);
  }
  EXPECT_EQ(rng.Interval(0), 0u);
}

// Mt19937 gives std::mt19937's words on both of its paths (AVX2 where the CPU has it, and the
// portable one), across many blocks, through operator() and through Pending/Take.
TEST(Properties, Mt19937IsStdMt19937OnEveryPath) {
  // The path is process-wide: put it back however the test ends.
  struct Restore {
    bool vector = Mt19937::VectorGenerate();
    ~Restore() { Mt19937::SetVectorGenerateForTesting(vector); }
  } restore;
  for (const bool on : {false, true}) {
    Mt19937::SetVectorGenerateForTesting(on);
    for (uint32_t seed : {0u, 1u, 5489u, 0xffffffffu}) {
      std::mt19937 want(seed);
      Mt19937 one(seed), many(seed);
      for (int i = 0; i < 624 * 5 + 7; ++i) ASSERT_EQ(one(), want()) << seed << " word " << i;
      std::mt19937 again(seed);
      for (size_t taken = 0; taken < 624 * 5 + 7;) {
        const std::span<const uint32_t> words = many.Pending();
        ASSERT_FALSE(words.empty());
        const size_t take = std::min<size_t>(words.size(), 1 + taken % 500);
        for (size_t j = 0; j < take; ++j)
          ASSERT_EQ(words[j], again()) << seed << " word " << taken + j;
        many.Take(take);
        taken += take;
      }
    }
  }
}

// Tables whose pages went back once written (gridfeed tables) keep their sizes, and refuse a
// reader of their entries (which would read zeros) rather than hand it a view.
TEST(PropertiesDeathTest, ReleasedTablesKeepTheirSizesAndRefuseReaders) {
  GptTables t;
  t.shuffle_index32 = PageArray<uint32_t>(5);
  t.sample_index32 = PageArray<int32_t>(12);
  t.contents_released = true;
  EXPECT_EQ(t.num_samples(), 5);
  EXPECT_DEATH(t.View(), "contents_released");
  t.contents_released = false;
  EXPECT_EQ(t.View().num_samples(), 5);
}

// FillIntervals32 gives Interval32's values one at a time and consumes the same draws: bounds
// at and around powers of two (where the mask changes, and rejections are most and fewest),
// 1, the largest 32-bit bound, and random ones; runs across several bit lengths.
TEST(Properties, FillIntervalsDrawsAsIntervalOneAtATime) {
  std::mt19937 g(5);
  int blocks = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    for (uint32_t max : {1u, 2u, 3u, 4u, 64u, 65u, 1000u, (1u << 20) + 1, (1u << 31) - 1, 1u << 31,
                         0xffffffffu, static_cast<uint32_t>(1u + g() % 0xfffffffeu)}) {
      const size_t count = std::min<size_t>(max, 1 + g() % 1500);
      NumpyRandomState a(seed), b(seed);
      std::vector<uint32_t> filled(count);
      a.FillIntervals32(max, filled.data(), count);
      for (size_t k = 0; k < count; ++k) {
        ASSERT_EQ(filled[k], b.Interval32(max - static_cast<uint32_t>(k)))
            << "seed " << seed << " max " << max << " draw " << k;
      }
      ASSERT_EQ(a.Next32(), b.Next32()) << "seed " << seed << " max " << max;
      ++blocks;
    }
  }
  EXPECT_EQ(blocks, 40 * 12);
}

// ShuffleSome in pieces of any size (1, a block, thousands) gives what it gives in one piece
// (Shuffle, golden-tested against numpy) and leaves the generator where that does: how the
// build slices the shuffle index between other work does not change a draw.
TEST(Properties, ShuffleInPiecesIsShuffle) {
  std::mt19937 g(11);
  for (uint32_t seed = 0; seed < 30; ++seed) {
    const size_t n = 1 + g() % 20000;
    std::vector<uint32_t> whole(n), pieces(n);
    std::iota(whole.begin(), whole.end(), 0u);
    pieces = whole;
    NumpyRandomState a(seed), b(seed);
    a.Shuffle(std::span<uint32_t>(whole));
    size_t i = n;
    int calls = 0;
    while (i > 1) {
      const size_t piece = seed % 3 == 0 ? 1 : 1 + g() % (seed % 3 == 1 ? 70 : 5000);
      b.ShuffleSome(std::span<uint32_t>(pieces), i, piece);
      ++calls;
    }
    ASSERT_EQ(pieces, whole) << "seed " << seed << " n " << n << " in " << calls << " pieces";
    ASSERT_EQ(a.Next32(), b.Next32()) << "seed " << seed;
  }
}

class TablesProperty : public ::testing::TestWithParam<std::tuple<bool, int64_t>> {};

TEST_P(TablesProperty, SamplesAreInBoundsAndDeterministic) {
  const auto [extra, num_samples] = GetParam();
  auto lengths = RandomLengths(5, 400);
  io::LeSpan<int32_t> len(reinterpret_cast<const std::byte*>(lengths.data()), lengths.size());
  GptTablesConfig c;
  c.seq_length = 64;
  c.seed = 11;
  c.add_extra_token = extra;
  c.num_samples = num_samples;
  auto t = BuildGptTables(len, 10, 390, c).value();
  const int64_t x = extra ? 1 : 0;
  ASSERT_GE(t.num_samples(), num_samples);
  // Shuffle index is a permutation of the samples.
  std::vector<int64_t> s(t.num_samples());
  for (int64_t i = 0; i < t.num_samples(); ++i) s[i] = t.ShuffleAt(i);
  std::sort(s.begin(), s.end());
  for (int64_t i = 0; i < t.num_samples(); ++i) ASSERT_EQ(s[i], i);
  // Document index holds each split sequence once per epoch.
  std::vector<int64_t> counts(400, 0);
  for (int32_t d : t.document_index) ++counts[d];
  for (int i = 0; i < 400; ++i) ASSERT_EQ(counts[i], (i >= 10 && i < 390) ? t.num_epochs : 0);
  // Every sample covers exactly seq_length + x tokens inside the document index.
  for (int64_t j = 0; j < t.num_samples(); ++j) {
    const int64_t d0 = t.SampleDoc(j), o0 = t.SampleOffset(j);
    const int64_t d1 = t.SampleDoc(j + 1), o1 = t.SampleOffset(j + 1);
    ASSERT_LE(d0, d1);
    ASSERT_LT(d1, static_cast<int64_t>(t.document_index.size()));
    int64_t tokens = 0;
    if (d0 == d1) {
      tokens = o1 - o0 + x;
    } else {
      tokens = lengths[t.document_index[d0]] - o0;
      for (int64_t d = d0 + 1; d < d1; ++d) tokens += lengths[t.document_index[d]];
      tokens += o1 + x;
    }
    ASSERT_EQ(tokens, c.seq_length + x) << "sample " << j;
    ASSERT_LE(o1 + x, lengths[t.document_index[d1]]);
  }
  // Same seed, same bytes; another seed, another order.
  auto again = BuildGptTables(len, 10, 390, c).value();
  EXPECT_EQ(again.document_index, t.document_index);
  EXPECT_EQ(again.shuffle_index32, t.shuffle_index32);
  EXPECT_EQ(again.sample_index32, t.sample_index32);
  c.seed = 12;
  auto other = BuildGptTables(len, 10, 390, c).value();
  EXPECT_NE(other.document_index, t.document_index);
  EXPECT_NE(other.shuffle_index32, t.shuffle_index32);
}

INSTANTIATE_TEST_SUITE_P(Order, TablesProperty,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(int64_t{10}, int64_t{900},
                                                              int64_t{4000})));

// The tables of `docs` documents equal one RandomState(seed) drawing the document index's
// segments (all epochs at once, or the last apart) and then the shuffle index's two parts.
void ExpectDrawnAsOneRandomState(const GptTables& t, int docs, uint32_t seed) {
  const int64_t E = t.num_epochs, n = t.num_samples();
  NumpyRandomState rng(seed);
  std::vector<int32_t> doc(static_cast<size_t>(docs * E));
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int32_t>(i % docs);
  const size_t last = t.separate_final_epoch ? static_cast<size_t>(docs * (E - 1)) : doc.size();
  rng.Shuffle(std::span<int32_t>(doc.data(), last));
  rng.Shuffle(std::span<int32_t>(doc.data() + last, doc.size() - last));
  EXPECT_TRUE(std::equal(doc.begin(), doc.end(), t.document_index.begin(), t.document_index.end()))
      << "document index, " << E << " epochs";
  const int64_t first = t.separate_final_epoch ? t.num_samples_sans_final_epoch : n;
  std::vector<uint32_t> shuffle(static_cast<size_t>(n));
  std::iota(shuffle.begin(), shuffle.end(), 0u);
  rng.Shuffle(std::span<uint32_t>(shuffle.data(), static_cast<size_t>(first)));
  rng.Shuffle(std::span<uint32_t>(shuffle.data() + first, static_cast<size_t>(n - first)));
  EXPECT_TRUE(std::equal(shuffle.begin(), shuffle.end(), t.shuffle_index32.begin(),
                         t.shuffle_index32.end()))
      << "shuffle index, " << E << " epochs";
}

// Builds whose stream to the applier fills (small chunks; and the default, where 600K draws
// may or may not fill it), so the drawing thread skips a second generator and shuffles the
// shuffle index between its pushes; and builds with no drawing thread: the tables must equal
// one RandomState drawing the document index's segments and then the shuffle index's two
// parts in order, with one epoch and with several (a separate final epoch or not).
TEST(Properties, BuildsWithAFullStreamDrawAsOneRandomState) {
  std::mt19937 g(3);
  const int docs = 600000;
  std::vector<int32_t> lengths(docs);
  for (auto& l : lengths) l = 1 + static_cast<int32_t>(g() % 40);
  int64_t tokens = 0;
  for (int32_t l : lengths) tokens += l;
  io::LeSpan<int32_t> len(reinterpret_cast<const std::byte*>(lengths.data()), lengths.size());
  int separate = 0;
  // One epoch; 2.3 epochs (the last apart, under 80 % of an epoch); 2.95 epochs (all at once).
  // Chunk 1: no drawing thread at all (the calling thread draws and applies).
  for (size_t chunk : {size_t{16}, size_t{256}, size_t{0}, size_t{1}})
    for (double epochs : {0.0, 2.3, 2.95}) {
      GptTablesConfig c;
      c.two_threads_from = chunk == 1 ? std::numeric_limits<int64_t>::max() : 0;
      c.testing_draw_chunk = chunk == 1 ? 0 : chunk;
      c.testing_pass_every = chunk == 16 ? 64 : 0;  // give the pairs back every 64 positions
      c.seed = 77;
      c.seq_length = 64;
      if (epochs > 0) c.num_samples = static_cast<int64_t>(epochs * tokens / c.seq_length);
      // Each table as it was when the build called it final, and where it was.
      struct Final {
        int calls = 0;
        bool read_after = false;
        std::vector<char> bytes;
        const void* at = nullptr;
        std::thread::id thread;
      };
      std::mutex mu;
      std::map<GptTable, Final> finals;
      c.table_final = [&](GptTable table, const GptTables& t, bool read_after) {
        const OutputArray a = MidArray("", t, table, nullptr, false);
        std::lock_guard<std::mutex> lock(mu);
        Final& f = finals[table];
        ++f.calls;
        f.read_after = read_after;
        const char* p = static_cast<const char*>(a.data);
        f.bytes.assign(p, p + a.size_bytes);
        f.at = a.data;
        f.thread = std::this_thread::get_id();
      };
      auto t = BuildGptTables(len, 0, docs, c);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      const int64_t E = t->num_epochs;
      if (chunk == 1) {
        EXPECT_TRUE(finals.empty()) << "told of tables without a drawing thread";
      } else {
        ASSERT_EQ(finals.size(), 3u);
        for (GptTable table : kGptTables) {
          SCOPED_TRACE(static_cast<int>(table));
          const Final& f = finals[table];
          EXPECT_EQ(f.calls, 1);
          const OutputArray a = MidArray("", *t, table, nullptr, false);
          EXPECT_EQ(f.at, a.data) << "moved after it was final";
          const char* p = static_cast<const char*>(a.data);
          EXPECT_TRUE(f.bytes == std::vector<char>(p, p + a.size_bytes))
              << "changed after it was final";
          // Only a document index of several epochs is read after (by the walk).
          EXPECT_EQ(f.read_after, table == GptTable::kDocumentIndex && E > 1);
        }
        EXPECT_NE(finals[GptTable::kShuffleIndex].thread, std::this_thread::get_id());
        EXPECT_EQ(finals[GptTable::kSampleIndex].thread, std::this_thread::get_id());
      }
      ExpectDrawnAsOneRandomState(*t, docs, c.seed);
      separate += t->separate_final_epoch ? 1 : 0;
    }
  EXPECT_EQ(separate, 4);
}

// The stream's consumer keeps a window of 32 prefetched targets: documents around that size
// (the window not filled, filled exactly, one past it) on the stream path, one epoch and
// several, draw as one RandomState.
TEST(Properties, SmallBuildsOnTheStreamDrawAsOneRandomState) {
  for (int docs : {2, 3, 31, 32, 33, 34, 65}) {
    for (int64_t samples : {int64_t{0}, int64_t{200}}) {  // 0: one epoch; 200: several
      SCOPED_TRACE(std::to_string(docs) + " documents, " + std::to_string(samples) + " samples");
      std::vector<int32_t> lengths(static_cast<size_t>(docs));
      for (int d = 0; d < docs; ++d) lengths[static_cast<size_t>(d)] = 3 + d % 5;
      io::LeSpan<int32_t> len(reinterpret_cast<const std::byte*>(lengths.data()), lengths.size());
      GptTablesConfig c;
      c.two_threads_from = 0;  // a drawing thread and a stream even for a few documents
      c.testing_draw_chunk = 16;
      c.seed = 5;
      c.seq_length = 4;
      if (samples > 0) c.num_samples = samples;
      auto t = BuildGptTables(len, 0, docs, c);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      const int64_t E = t->num_epochs;
      if (samples > 0) {
        EXPECT_GT(E, 1);
      }
      ExpectDrawnAsOneRandomState(*t, docs, c.seed);
    }
  }
}

// Megatron's build_sample_idx as its loop reads (sample by sample, taking documents until
// seq_length + x tokens are covered), written here apart from the library's walk so the two
// can differ: rows of (position, offset) for samples 0..n.
std::vector<int32_t> MegatronSampleWalk(const std::vector<int32_t>& lengths,
                                        std::span<const int32_t> document_index, int64_t seq_length,
                                        int64_t n, bool add_extra_token) {
  const int64_t x = add_extra_token ? 1 : 0;
  const int64_t last = static_cast<int64_t>(document_index.size()) - 1;
  std::vector<int32_t> out(static_cast<size_t>(2 * (n + 1)), 0);
  int64_t d = 0, offset = 0;
  for (int64_t s = 1; s <= n; ++s) {
    int64_t remaining = seq_length + x;
    while (remaining != 0) {
      const int64_t length = lengths[static_cast<size_t>(document_index[static_cast<size_t>(d)])];
      const int64_t doc_length = length - offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        offset += remaining + doc_length - x;
        remaining = 0;
      } else {
        if (d == last) {
          offset = length - x;
          break;
        }
        ++d;
        offset = 0;
      }
    }
    out[static_cast<size_t>(2 * s)] = static_cast<int32_t>(d);
    out[static_cast<size_t>(2 * s + 1)] = static_cast<int32_t>(offset);
  }
  return out;
}

// The build's sample index (one epoch: walked over the (id, length) pairs it shuffled; several:
// through the document index) and BuildSampleIndex (golden-tested against Megatron's helper)
// against Megatron's loop above: empty documents, rows ending at a document's end, documents
// longer than a sample, runs past the last token (no drop_last), one epoch and several (with
// and without a separate final epoch).
TEST(Properties, SampleIndexMatchesTheWalkThroughTheDocumentIndex) {
  int one_epoch = 0, released = 0;
  int cases = 0, separate = 0;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 g(seed);
    const int docs = 1 + static_cast<int>(g() % 3000);
    const int32_t max_length = seed % 3 == 0 ? 3 : 1 + static_cast<int32_t>(g() % 400);
    std::vector<int32_t> lengths(static_cast<size_t>(docs));
    for (auto& l : lengths) l = g() % 5 == 0 ? 0 : static_cast<int32_t>(g() % (max_length + 1));
    lengths.back() = seed % 4 == 0 ? 0 : lengths.back();  // an empty last document too
    int64_t tokens = 0;
    for (int32_t l : lengths) tokens += l;
    if (tokens < 2) continue;
    io::LeSpan<int32_t> len(reinterpret_cast<const std::byte*>(lengths.data()), lengths.size());
    for (bool extra : {false, true}) {
      for (bool drop_last : {true, false}) {
        GptTablesConfig c;
        c.seed = seed;
        c.seq_length = 1 + static_cast<int64_t>(g() % (seed % 2 ? 7 : 600));
        c.add_extra_token = extra;
        c.drop_last = drop_last;
        c.testing_pass_every = int64_t{1} << (seed % 8);  // ids out, pairs back: every 1-128
        // A drawing thread or none.
        c.two_threads_from = seed % 3 == 1 ? std::numeric_limits<int64_t>::max() : 0;
        // No sample count (one epoch), or one that takes several epochs.
        if (seed % 5 != 0)
          c.num_samples = 1 + static_cast<int64_t>(g() % (3 * tokens / c.seq_length + 1));
        auto t = BuildGptTables(len, 0, docs, c);
        ASSERT_TRUE(t.ok()) << t.status().ToString();
        const int64_t n = t->num_samples();
        const std::vector<int32_t> megatron =
            MegatronSampleWalk(lengths, t->document_index, c.seq_length, n, extra);
        auto standalone =
            BuildSampleIndex<int32_t>(len, t->document_index, c.seq_length, t->num_epochs,
                                      t->num_tokens_per_epoch, drop_last, extra);
        ASSERT_EQ(t->sample_index32.size(), megatron.size()) << "seed " << seed;
        ASSERT_EQ(standalone.size(), megatron.size()) << "seed " << seed;
        for (size_t i = 0; i < megatron.size(); ++i) {
          ASSERT_EQ(t->sample_index32[i], megatron[i])
              << "seed " << seed << " extra " << extra << " drop_last " << drop_last << " entry "
              << i << " of " << megatron.size() << ", seq " << c.seq_length;
          ASSERT_EQ(standalone[i], megatron[i]) << "seed " << seed << " entry " << i;
        }
        ++cases;
        separate += t->separate_final_epoch ? 1 : 0;
        one_epoch += t->num_epochs == 1 ? 1 : 0;
        // One epoch past a 4 KiB page of pairs (512) and a pass: pages were given back.
        released += t->num_epochs == 1 && docs > 512 + (int64_t{1} << (seed % 8)) ? 1 : 0;
      }
    }
  }
  EXPECT_GT(cases, 150);
  EXPECT_GT(separate, 0);
  EXPECT_GT(one_epoch, 30);
  EXPECT_GT(released, 10);
}

// Megatron's epoch loop stops at one epoch when nothing is needed; an empty range asked for 0
// samples without the extra token must not divide by its 0 tokens.
TEST(Properties, EmptyRangeAskedForNothingIsOneEmptyEpoch) {
  std::vector<int32_t> lengths = {0, 0, 0};
  io::LeSpan<int32_t> len(reinterpret_cast<const std::byte*>(lengths.data()), lengths.size());
  GptTablesConfig c;
  c.seq_length = 4;
  c.num_samples = 0;
  c.add_extra_token = false;
  auto t = BuildGptTables(len, 0, 3, c);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_epochs, 1);
  EXPECT_EQ(t->num_samples(), 0);
}

TEST(Properties, EmptySplitWithSamplesIsAnErrorNotAHang) {
  std::vector<int32_t> lengths = {5, 5};
  GptTablesConfig c;
  c.seq_length = 4;
  c.num_samples = 3;
  auto t = BuildGptTables(
      io::LeSpan<int32_t>(reinterpret_cast<const std::byte*>(lengths.data()), lengths.size()), 1, 1,
      c);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no tokens"), std::string::npos);
}

// Lengths the index check has not passed yet (it runs beside the build): a negative one, or
// more tokens than the store holds, are refused before any table is sized from them.
TEST(Properties, ImpossibleLengthsAreRefusedBeforeTheTables) {
  const std::vector<int32_t> negative = {5, -3, 5}, huge = {5, 2147483647, 5};
  auto span = [](const std::vector<int32_t>& v) {
    return io::LeSpan<int32_t>(reinterpret_cast<const std::byte*>(v.data()), v.size());
  };
  GptTablesConfig c;
  c.seq_length = 1;
  auto t = BuildGptTables(span(negative), 0, 3, c);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("negative length (-3)"), std::string::npos)
      << t.status().ToString();
  c.max_tokens = 15;  // the store's own count
  t = BuildGptTables(span(huge), 0, 3, c);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("more than its store's 15"), std::string::npos)
      << t.status().ToString();
  const std::vector<int32_t> fits = {5, 5, 5};
  EXPECT_TRUE(BuildGptTables(span(fits), 0, 3, c).ok());  // exactly the store's count
}

}  // namespace
}  // namespace gridfeed::order
