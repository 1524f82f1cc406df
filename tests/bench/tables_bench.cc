// Table build for a synthetic corpus of N documents (log-normal lengths, mean ~2048 tokens;
// only the .idx is real, the .bin is sparse), seq_length 4096, about 1 and 3 epochs.
// Each phase is reported next to a floor measured on arrays of the same size in the same
// run: one sequential write of every table and one random-access pass over the document
// index; with peak resident memory during the build next to the bytes of the tables. And the
// document-index shuffle's draws alone (BM_Targets), next to the same draws on the portable
// MT19937 path. And the index's full check with its digest (what world rank 0 runs beside
// the build), next to one read of the same file into a page-aligned buffer with its digest.
// GRIDFEED_BENCH_DOCUMENTS sets N (default 10,000,000), GRIDFEED_BENCH_MEAN_TOKENS the mean length,
// GRIDFEED_BENCH_SAMPLES the 1-epoch sample count.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <span>

#include "gridfeed/core/memory_usage.h"
#include "gridfeed/core/page_array.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/index_file.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/numpy_random.h"
#include "gridfeed/order/table_image.h"
#include "ratio_reporter.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}
int64_t NumDocuments() { return EnvInt("GRIDFEED_BENCH_DOCUMENTS", 10'000'000); }
// Mean document length in tokens (GRIDFEED_BENCH_MEAN_TOKENS, default 2048).
double MeanTokens() { return static_cast<double>(EnvInt("GRIDFEED_BENCH_MEAN_TOKENS", 2048)); }

// Writes PREFIX.idx directly (fast) and a sparse PREFIX.bin of the right size.
const std::string& Corpus() {
  static const std::string prefix = [] {
    // One file per corpus shape, so runs of different sizes do not overwrite each other.
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("gridfeed_tables_bench_" + std::to_string(NumDocuments()) + "_" +
                            std::to_string(static_cast<int64_t>(MeanTokens()))))
                              .string();
    const int64_t n = NumDocuments();
    std::mt19937_64 rng(42);
    // log-normal with mean exp(mu + sigma^2/2) ~ 2048
    std::lognormal_distribution<double> dist(std::log(MeanTokens()) - 0.5, 1.0);
    std::vector<int32_t> lengths(n);
    std::vector<int64_t> pointers(n);
    int64_t bytes = 0;
    for (int64_t i = 0; i < n; ++i) {
      lengths[i] = static_cast<int32_t>(std::clamp(dist(rng), 1.0, 1e6));
      pointers[i] = bytes;
      bytes += int64_t{lengths[i]} * 2;
    }
    std::vector<int64_t> docs(n + 1);
    std::iota(docs.begin(), docs.end(), 0);
    std::string idx(gridfeed::io::kIndexMagic, 9);
    uint64_t version = 1, s = n, d = n + 1;
    uint8_t code = 8;
    idx.append(reinterpret_cast<char*>(&version), 8);
    idx.append(reinterpret_cast<char*>(&code), 1);
    idx.append(reinterpret_cast<char*>(&s), 8);
    idx.append(reinterpret_cast<char*>(&d), 8);
    idx.append(reinterpret_cast<char*>(lengths.data()), n * 4);
    idx.append(reinterpret_cast<char*>(pointers.data()), n * 8);
    idx.append(reinterpret_cast<char*>(docs.data()), (n + 1) * 8);
    (void)gridfeed::io::WriteStringToFile(p + ".idx", idx);
    int fd = ::open((p + ".bin").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0 || ::ftruncate(fd, bytes) != 0) std::abort();
    ::close(fd);
    return p;
  }();
  return prefix;
}

gridfeed::order::DatasetConfig Config(double epochs) {
  gridfeed::order::DatasetConfig c;
  c.data_path = std::vector<std::string>{Corpus()};
  c.split = "100,0,0";
  c.seq_length = 4096;
  c.seed = 1234;
  // About `epochs` epochs; GRIDFEED_BENCH_SAMPLES overrides the 1-epoch sample count.
  const double per_epoch = static_cast<double>(NumDocuments()) * MeanTokens() / 4096.0;
  c.sizes[0] = static_cast<int64_t>(epochs * 0.98 * per_epoch);
  if (epochs == 1.0) c.sizes[0] = EnvInt("GRIDFEED_BENCH_SAMPLES", *c.sizes[0]);
  return c;
}

// Bytes of one dataset's three tables.
double TableBytes(const gridfeed::order::GptTables& t) {
  return static_cast<double>(t.document_index.size() * 4 + t.sample_index32.size() * 4 +
                             t.sample_index64.size() * 8 + t.shuffle_index32.size() * 4 +
                             t.shuffle_index64.size() * 8);
}

void BM_Build(benchmark::State& state, double epochs) {
  const auto config = Config(epochs);  // writes the corpus on first use, outside the timing
  for (auto _ : state) {
    // Peak resident memory of this build alone (the .idx mapping included), next to the
    // bytes of the tables it returns.
    const bool reset = gridfeed::ResetPeakResident();
    auto t0 = Clock::now();
    auto b = gridfeed::order::BuildDatasets(config);
    if (!b.ok()) {
      state.SkipWithError(b.status().ToString().c_str());
      return;
    }
    const auto& m = b->splits[0]->mids[0];
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    state.counters["epochs"] = static_cast<double>(m.tables.num_epochs);
    state.counters["samples"] = static_cast<double>(m.tables.num_samples());
    state.counters["doc_idx_s"] = m.times.document_index;
    state.counters["sample_idx_s"] = m.times.sample_index;
    state.counters["shuffle_idx_s"] = m.times.shuffle_index;
    state.counters["open_s"] = b->seconds_open;
    state.counters["checks_beside_s"] = b->seconds_checks_beside;
    if (reset) {
      state.counters["peak_rss_MB"] = static_cast<double>(gridfeed::PeakResidentBytes()) / 1e6;
      state.counters["tables_MB"] = TableBytes(m.tables) / 1e6;
    }
  }
}

// Floor: write every table once sequentially (same sizes) and one random-access pass
// reading lengths[document_index[i]].
void BM_Floor(benchmark::State& state, double epochs) {
  auto b = gridfeed::order::BuildDatasets(Config(epochs));
  const auto& m = b->splits[0]->mids[0];
  const auto lengths = m.dataset->sequence_lengths();
  const size_t nd = m.tables.document_index.size();
  const size_t ns = static_cast<size_t>(m.tables.num_samples());
  for (auto _ : state) {
    auto t0 = Clock::now();
    // The same memory the build uses (uninitialised, huge pages), each entry written once.
    gridfeed::PageArray<int32_t> doc(nd);
    std::iota(doc.begin(), doc.end(), 0);
    gridfeed::PageArray<int32_t> sample(2 * (ns + 1));
    std::fill(sample.begin(), sample.end(), 1);
    gridfeed::PageArray<uint32_t> shuffle(ns);
    std::iota(shuffle.begin(), shuffle.end(), 0u);
    const double write_s = std::chrono::duration<double>(Clock::now() - t0).count();
    auto t1 = Clock::now();
    int64_t sum = 0;
    for (size_t i = 0; i < nd; ++i) sum += lengths[static_cast<size_t>(m.tables.document_index[i])];
    benchmark::DoNotOptimize(sum);
    benchmark::DoNotOptimize(sample.data());
    const double random_s = std::chrono::duration<double>(Clock::now() - t1).count();
    state.SetIterationTime(write_s + random_s);
    state.counters["write_s"] = write_s;
    state.counters["random_pass_s"] = random_s;
  }
}

// The document-index shuffle's swap targets (numpy's masked draws from MT19937, one per
// document) as the build draws them: MT19937 blocks generated with AVX2 where the CPU has it.
// Next to the same draws on the portable path (same run), for the ratio.
void Targets(benchmark::State& state, bool vector) {
  const bool was = gridfeed::order::Mt19937::VectorGenerate();
  gridfeed::order::Mt19937::SetVectorGenerateForTesting(vector);
  const size_t n = static_cast<size_t>(NumDocuments());
  uint32_t block[256];
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    gridfeed::order::NumpyRandomState rng(1234);
    uint64_t sum = 0;
    for (size_t i = n; i > 1;) {
      const size_t m = std::min<size_t>(256, i - 1);
      rng.FillIntervals32(static_cast<uint32_t>(i - 1), block, m);
      sum += block[m - 1];
      i -= m;
    }
    benchmark::DoNotOptimize(sum);
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  state.counters["ns_per_target"] =
      seconds * 1e9 / (static_cast<double>(n) * static_cast<double>(state.iterations()));
  state.counters["vector"] = gridfeed::order::Mt19937::VectorGenerate() ? 1 : 0;
  gridfeed::order::Mt19937::SetVectorGenerateForTesting(was);
}
// Its digest of the file at `path` through `buffer`, or nullopt on an error.
std::optional<uint64_t> ReadAndDigest(const std::string& path,
                                      gridfeed::PageArray<std::byte>& buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return std::nullopt;
  XXH3_state_t* xs = XXH3_createState();
  bool ok = xs != nullptr;
  if (ok) XXH3_64bits_reset(xs);
  for (off_t at = 0; ok;) {
    const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), at);
    if (got < 0 && errno == EINTR) continue;
    ok = got >= 0;
    if (got <= 0) break;
    XXH3_64bits_update(xs, buffer.data(), static_cast<size_t>(got));
    at += got;
  }
  const uint64_t digest = ok ? XXH3_64bits_digest(xs) : 0;
  if (xs != nullptr) XXH3_freeState(xs);
  ::close(fd);
  if (!ok) return std::nullopt;
  return digest;
}

// The full index check and XXH3 digest of the corpus' index, as the build's check beside the
// tables runs them, its open (a mapping, the header) included; against its floor below, the
// check reads the lengths twice and adds the checks.
void BM_IndexCheck(benchmark::State& state) {
  const std::string prefix = Corpus();
  gridfeed::PageArray<std::byte> buffer(size_t{1} << 20);
  if (!ReadAndDigest(prefix + ".idx", buffer)) {  // the file into the page cache, untimed
    state.SkipWithError(("cannot read " + prefix + ".idx").c_str());
    return;
  }
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto ds = gridfeed::io::IndexedDataset::Open(prefix, false,
                                                 gridfeed::io::IndexCheck::kStructure, false);
    const gridfeed::Status st = ds.ok() ? ds->CheckIndexFully(true) : ds.status();
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(ds->index_xxh3());
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

// Floor: the same file read once through a descriptor into a page-aligned buffer, with the
// same digest.
void BM_IndexFloor(benchmark::State& state) {
  const std::string path = Corpus() + ".idx";
  gridfeed::PageArray<std::byte> buffer(size_t{1} << 20);
  if (!ReadAndDigest(path, buffer)) {  // also brings the file into the page cache, untimed
    state.SkipWithError(("cannot read " + path).c_str());
    return;
  }
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const auto digest = ReadAndDigest(path, buffer);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!digest) {
      state.SkipWithError(("cannot read " + path).c_str());
      return;
    }
    benchmark::DoNotOptimize(*digest);
  }
}

// World rank 0's image into its node window, as the start-up writes it: the tables of one
// epoch (built untimed) into a fresh shared mapping, then the image digest of that mapping.
// Against its floor below, this shows what fresh shared pages add (on a VM with shadow page
// tables, 4-50 us a page touched from user space: the writer and the digest leave them to the
// kernel, core/kernel_copy.h).
void BM_ImageIntoWindow(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto b = gridfeed::order::BuildDatasets(Config(1.0));
    if (!b.ok()) {
      state.SkipWithError(b.status().ToString().c_str());
      return;
    }
    auto writer = gridfeed::order::TableImageWriter::Create(std::move(b).value());
    const size_t n = writer->size();
    const bool untouched = writer->leaves_dst_untouched();
    state.ResumeTiming();
    const auto t0 = Clock::now();
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      state.SkipWithError("cannot map the window");
      return;
    }
    auto* window = static_cast<std::byte*>(p);
    writer->WriteTo(window);
    benchmark::DoNotOptimize(
        gridfeed::order::ImageDigest(std::span<const std::byte>(window, n), untouched));
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    state.counters["image_MB"] = static_cast<double>(n) / 1e6;
    ::munmap(p, n);
  }
}

// Floor: as many bytes copied between two buffers already written, and the same digest.
void BM_ImageFloor(benchmark::State& state) {
  auto b = gridfeed::order::BuildDatasets(Config(1.0));
  if (!b.ok()) {
    state.SkipWithError(b.status().ToString().c_str());
    return;
  }
  const size_t n = gridfeed::order::TableImageWriter::Create(std::move(b).value())->size();
  gridfeed::PageArray<std::byte> from(n), to(n);
  std::memset(from.data(), 1, n);
  std::memset(to.data(), 0, n);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    std::memcpy(to.data(), from.data(), n);
    benchmark::DoNotOptimize(gridfeed::order::ImageDigest(std::span<const std::byte>(to)));
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

void BM_Targets(benchmark::State& state) { Targets(state, true); }
void BM_TargetsPortable(benchmark::State& state) { Targets(state, false); }

BENCHMARK(BM_Targets)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TargetsPortable)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IndexCheck)->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IndexFloor)->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ImageIntoWindow)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ImageFloor)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Build, epochs1, 1.0)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_Floor, epochs1, 1.0)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_Build, epochs3, 3.0)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_Floor, epochs3, 3.0)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

int main(int argc, char** argv) {
  // GRIDFEED_BENCH_WRITE_ONLY=1: write the synthetic corpus, print its prefix, exit (for the
  // MPI start-up benchmark).
  if (std::getenv("GRIDFEED_BENCH_WRITE_ONLY")) {
    std::printf("%s\n", Corpus().c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  gridfeed::bench::RatioReporter reporter(
      std::vector<std::pair<std::string, std::string>>{{"BM_Build", "BM_Floor"},
                                                       {"BM_Targets", "BM_TargetsPortable"},
                                                       {"BM_IndexCheck", "BM_IndexFloor"},
                                                       {"BM_ImageIntoWindow", "BM_ImageFloor"}});
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
