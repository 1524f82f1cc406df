// IndexedDataset::Get() over random sequences vs a plain memcpy of the same bytes.
// Both copy the tokens of the same randomly chosen sequences into one output buffer; the
// floor reads the same byte ranges straight out of the mapping with memcpy.
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/io/indexed_dataset_builder.h"
#include "ratio_reporter.h"

namespace {

using gridfeed::io::DType;
using gridfeed::io::IndexedDataset;

constexpr int kSequences = 20000;
constexpr int kPicks = 4096;

const IndexedDataset& Corpus() {
  static IndexedDataset* ds = [] {
    const std::string prefix =
        (std::filesystem::temp_directory_path() / "gridfeed_get_bench").string();
    auto b = gridfeed::io::IndexedDatasetBuilder::Create(prefix, DType::kUInt16).value();
    std::mt19937 rng(1);
    std::vector<int64_t> seq;
    for (int i = 0; i < kSequences; ++i) {
      seq.resize(64 + rng() % 2048);
      for (auto& t : seq) t = rng() % 50000;
      (void)b.AddItem(seq);
      b.EndDocument();
    }
    (void)b.Finalize();
    return new IndexedDataset(IndexedDataset::Open(prefix).value());
  }();
  return *ds;
}

std::vector<int64_t> Picks() {
  std::mt19937 rng(2);
  std::vector<int64_t> p(kPicks);
  for (auto& x : p) x = rng() % kSequences;
  return p;
}

void BM_Get(benchmark::State& state) {
  const auto& ds = Corpus();
  auto picks = Picks();
  std::vector<std::byte> out(4096 * 2);
  int64_t bytes = 0;
  for (auto _ : state) {
    for (int64_t s : picks) {
      auto span = ds.Get(s).value();
      auto b = span.bytes();
      std::memcpy(out.data(), b.data(), b.size());
      bytes += static_cast<int64_t>(b.size());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(bytes);
}

void BM_MemcpyFloor(benchmark::State& state) {
  const auto& ds = Corpus();
  auto picks = Picks();
  // Byte ranges precomputed, so the loop is nothing but memcpy from the same mapping.
  std::vector<std::span<const std::byte>> ranges;
  for (int64_t s : picks) ranges.push_back(ds.GetUnchecked(s, 0, ds.sequence_lengths()[s]).bytes());
  std::vector<std::byte> out(4096 * 2);
  int64_t bytes = 0;
  for (auto _ : state) {
    for (auto r : ranges) {
      std::memcpy(out.data(), r.data(), r.size());
      bytes += static_cast<int64_t>(r.size());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(bytes);
}

BENCHMARK(BM_Get);
BENCHMARK(BM_MemcpyFloor);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  gridfeed::bench::RatioReporter reporter(
      std::vector<std::pair<std::string, std::string>>{{"BM_Get", "BM_MemcpyFloor"}});
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
