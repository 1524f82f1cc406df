// OLMo core beyond the golden vectors: errors as Status, the linear-scan repetition search
// against OLMo's reshape-and-compare formulation (design note 7.2) on random arrays, the
// DataLoader tail without materialising batches, and truncation without a second copy.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_instance.h"
#include "gridfeed/order/olmo/olmo_order.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

void WriteBytes(const std::string& path, size_t n, uint8_t value = 7) {
  std::ofstream f(path, std::ios::binary);
  const std::string bytes(n, static_cast<char>(value));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(OlmoTokenFiles, ErrorsAreStatuses) {
  const std::string dir = testing::ScratchDir("olmo_token_files");
  WriteBytes(dir + "/a.npy", 40);  // 20 uint16 tokens
  WriteBytes(dir + "/odd.npy", 41);
  WriteBytes(dir + "/empty.npy", 0);
  WriteBytes(dir + "/a.mask.npy", 20);
  WriteBytes(dir + "/short.mask.npy", 9);
  using io::OlmoTokenFiles;
  EXPECT_EQ(OlmoTokenFiles::Open({}, {}, 2, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OlmoTokenFiles::Open({dir + "/a.npy"}, {}, 3, 4).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OlmoTokenFiles::Open({dir + "/a.npy"}, {}, 2, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OlmoTokenFiles::Open({dir + "/missing.npy"}, {}, 2, 4).status().code(),
            StatusCode::kNotFound);
  auto odd = OlmoTokenFiles::Open({dir + "/odd.npy"}, {}, 2, 4);
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("odd.npy"), std::string::npos);
  EXPECT_EQ(OlmoTokenFiles::Open({dir + "/a.npy"}, {dir + "/a.mask.npy", dir + "/a.mask.npy"}, 2, 4)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // 9 mask bytes are 2 instances of 4, the token file holds 5.
  auto mismatch = OlmoTokenFiles::Open({dir + "/a.npy"}, {dir + "/short.mask.npy"}, 2, 4);
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OlmoTokenFiles::Stat({dir + "/a.npy"}, {dir + "/short.mask.npy"}, 2, 4).status().code(),
            StatusCode::kInvalidArgument);
  // Empty files and repeated paths are fine; an empty file holds no instance.
  auto ok = OlmoTokenFiles::Open(
      {dir + "/empty.npy", dir + "/a.npy", dir + "/empty.npy", dir + "/a.npy"}, {}, 2, 6);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 6);
  EXPECT_EQ(ok->files()[1].dropped_tail_tokens, 2);
  EXPECT_EQ(ok->FileOf(0), 1);
  EXPECT_EQ(ok->FileOf(3), 3);
  std::vector<int64_t> x(6);
  ok->ReadInstance(5, x);
  EXPECT_EQ(x[0], 0x0707);
}

TEST(OlmoItem, OptionsAndIndexErrors) {
  const std::string dir = testing::ScratchDir("olmo_item");
  WriteBytes(dir + "/a.npy", 16);
  auto files = io::OlmoTokenFiles::Open({dir + "/a.npy"}, {}, 2, 4);
  ASSERT_TRUE(files.ok());
  OlmoItemOptions o;
  o.generate_attention_mask = true;
  EXPECT_EQ(GetOlmoItem(*files, 0, o).status().code(), StatusCode::kInvalidArgument);
  o = OlmoItemOptions();
  o.generate_doc_lengths = true;
  EXPECT_EQ(CheckItemOptions(o).code(), StatusCode::kInvalidArgument);
  o = OlmoItemOptions();
  auto out = GetOlmoItem(*files, -3, o);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "-3 is out of bounds for dataset of size 2");
  auto last = GetOlmoItem(*files, -1, o);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->index, 1);
}

TEST(OlmoOrder, SizeErrorsAndEmptyOrder) {
  EXPECT_FALSE(OlmoSizesFor(10, 0, 4, false).ok());
  EXPECT_FALSE(OlmoSizesFor(10, 4, 6, false).ok());  // 6 % 4 != 0
  EXPECT_FALSE(OlmoSizesFor(int64_t{0xffffffff}, 1, 1, false).ok());
  auto s = OlmoSizesFor(3, 4, 4, true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->total_size, 0);
  const Status empty = OlmoCheckOrderNotEmpty(3, 4, *s);
  EXPECT_EQ(empty.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(OlmoGlobalIndices(3, SeedWordsOf(1), true, *s).empty());
}

// drop_last truncation equals the full shuffle's head (the shuffle runs on N, not total).
TEST(OlmoOrder, TruncationIsTheShuffledHead) {
  for (int64_t n : {5, 17, 103, 1000}) {
    for (int64_t w : {2, 3, 7, 16}) {
      auto s = OlmoSizesFor(n, w, w, true);
      ASSERT_TRUE(s.ok());
      std::vector<uint32_t> full(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) full[i] = static_cast<uint32_t>(i);
      Pcg64 rng(SeedWordsOf(static_cast<uint64_t>(n * w)));
      ShuffleUint32(rng, full);
      const auto g = OlmoGlobalIndices(n, SeedWordsOf(static_cast<uint64_t>(n * w)), true, *s);
      ASSERT_EQ(static_cast<int64_t>(g.size()), s->total_size);
      EXPECT_TRUE(std::equal(g.begin(), g.end(), full.begin())) << n << " " << w;
    }
  }
}

// OlmoLoaderTail names the same entries, in the same order, as the partial batches that
// OlmoLoaderBatches emits, and every full batch comes out in stream order.
TEST(OlmoOrder, LoaderTailMatchesBatches) {
  for (int64_t len = 0; len < 40; ++len) {
    for (int64_t b : {1, 3, 4, 7}) {
      for (int64_t k = 0; k <= 5; ++k) {
        for (bool drop_last : {false, true}) {
          std::vector<int64_t> s(static_cast<size_t>(len));
          for (int64_t i = 0; i < len; ++i) s[i] = 100 + i;
          const auto batches = OlmoLoaderBatches(s, b, k, drop_last);
          std::vector<int64_t> full, partial;
          for (const auto& batch : batches) {
            auto& dst = static_cast<int64_t>(batch.index.size()) == b ? full : partial;
            if (&dst == &full) {
              EXPECT_TRUE(partial.empty()) << "a full batch after a partial one";
            }
            dst.insert(dst.end(), batch.index.begin(), batch.index.end());
          }
          const int64_t t = len / b * b;
          ASSERT_EQ(static_cast<int64_t>(full.size()), t);
          for (int64_t i = 0; i < t; ++i) EXPECT_EQ(full[i], s[i]);
          std::vector<int64_t> tail;
          for (int64_t pos : OlmoLoaderTail(len, b, k, drop_last)) tail.push_back(s[pos]);
          EXPECT_EQ(tail, partial) << len << " " << b << " " << k << " " << drop_last;
        }
      }
    }
  }
}

// OLMo's own formulation (design note 7.2): rows of p after padding with -1, each compared
// with the previous one (row 0 with the last), groups of all-equal rows widened by the
// partial stretches around them.
std::vector<PeriodicRun> ReshapeSearch(const std::vector<int64_t>& x, int64_t max_period,
                                       int64_t min_period) {
  std::vector<PeriodicRun> out;
  const int64_t len = static_cast<int64_t>(x.size());
  max_period = std::min(max_period, len / 3);
  for (int64_t p = min_period; p <= max_period; ++p) {
    std::vector<int64_t> padded = x;
    padded.resize(static_cast<size_t>(len + (p - len % p)), -1);
    const int64_t rows = static_cast<int64_t>(padded.size()) / p;
    auto eq = [&](int64_t r, int64_t c) {
      const int64_t prev = r == 0 ? rows - 1 : r - 1;
      return padded[r * p + c] == padded[prev * p + c];
    };
    std::vector<int64_t> all_equal;
    for (int64_t r = 0; r < rows; ++r) {
      bool all = true;
      for (int64_t c = 0; c < p; ++c) all = all && eq(r, c);
      if (all) all_equal.push_back(r);
    }
    for (size_t g = 0; g < all_equal.size();) {
      size_t h = g;
      while (h + 1 < all_equal.size() && all_equal[h + 1] == all_equal[h] + 1) ++h;
      const int64_t r1 = all_equal[g], r2 = all_equal[h];
      int64_t so = 0, eo = 0;
      while (so < p && eq(r1 - 1, p - 1 - so)) ++so;
      while (eo < p && eq(r2 + 1, eo)) ++eo;
      PeriodicRun run;
      run.start = (r1 - 1) * p - so;
      run.end = (r2 + 1) * p + eo;
      run.period = p;
      run.times = (run.end - run.start) / p;
      if (run.times > 2) out.push_back(run);
      g = h + 1;
    }
  }
  return out;
}

TEST(OlmoFilter, LinearScanEqualsReshapeSearch) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 200);
    const int64_t vocab = std::vector<int64_t>{1, 2, 3, 5, 50}[rng() % 5];
    std::vector<int64_t> x(static_cast<size_t>(len));
    for (auto& v : x) v = static_cast<int64_t>(rng() % vocab);
    // Plant a periodic run.
    const int64_t p = 1 + static_cast<int64_t>(rng() % 8);
    const int64_t at = static_cast<int64_t>(rng() % len);
    for (int64_t i = at + p; i < std::min(len, at + p * static_cast<int64_t>(2 + rng() % 40));
         ++i) {
      x[i] = x[i - p];
    }
    const int64_t min_period = 1 + static_cast<int64_t>(rng() % 3);
    const int64_t max_period = min_period + static_cast<int64_t>(rng() % 14);
    auto fast = FindPeriodicSequences(x, max_period, min_period);
    ASSERT_TRUE(fast.ok());
    ASSERT_EQ(*fast, ReshapeSearch(x, max_period, min_period)) << "trial " << trial;
    for (int64_t max_count : {1, 3, 10, 32}) {
      InstanceFilter f;
      f.repetition_max_period = max_period;
      f.repetition_min_period = min_period;
      f.repetition_max_count = max_count;
      bool ok = true;
      for (const auto& r : *fast) ok = ok && r.times < max_count;
      EXPECT_EQ(InstanceOk(x, f), ok);
    }
  }
}

TEST(OlmoFilter, MaskValueAndBadPeriodAreErrors) {
  const std::vector<int64_t> x = {1, 1, 1, -1, 1, 1};
  EXPECT_EQ(FindPeriodicSequences(x, 13, 1).status().code(), StatusCode::kInvalidArgument);
  const std::vector<int64_t> y = {1, 1, 1};
  EXPECT_EQ(FindPeriodicSequences(y, 13, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(DocumentLengths({}, 5).ok());
}

}  // namespace
}  // namespace gridfeed::order
