// Steady-state sample assembly on one reader over consecutive positions of a shuffled dataset,
// next to a floor that memcpys the same token bytes out of the same mapping and widens them to
// int64 (the least any feeder must do). seq_length 4096, int32 tokens, corpus in the page
// cache, no attention mask (the default).
//   BM_Assemble           order::AssembleSample: every field of the whole sample
//   BM_AssembleReference  the straightforward assembly it replaced (tests/order/reference_sample)
//   BM_Fields*            order::AssembleFields into one payload slot: every field (one
//                         pipeline stage), the first stage's (tokens, positions), the last
//                         stage's (labels, loss mask), and CP rank 0 of 2 with every field
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "gridfeed/io/indexed_dataset_builder.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/sample.h"
#include "gridfeed/order/sample_fields.h"
#include "order/reference_sample.h"
#include "ratio_reporter.h"

namespace {

using namespace gridfeed;

constexpr int64_t kSeq = 4096;

struct Fixture {
  order::BuiltDatasets built;
  order::SampleOptions options;
};

const Fixture& Get() {
  static Fixture* f = [] {
    const std::string prefix =
        (std::filesystem::temp_directory_path() / "gridfeed_assembly_bench").string();
    auto b = io::IndexedDatasetBuilder::Create(prefix, io::DType::kInt32).value();
    std::mt19937 rng(3);
    std::vector<int64_t> doc;
    for (int i = 0; i < 20000; ++i) {
      doc.resize(16 + rng() % 2048);
      for (auto& t : doc) t = rng() % 128000;
      doc.back() = 0;  // EOD
      (void)b.AddItem(doc);
      b.EndDocument();
    }
    (void)b.Finalize();
    order::DatasetConfig c;
    c.data_path = std::vector<std::string>{prefix};
    c.split = "100,0,0";
    c.seq_length = kSeq;
    c.seed = 1;
    auto* fx = new Fixture{order::BuildDatasets(c).value(), {}};
    fx->options.seq_length = kSeq;
    fx->options.pad_id = fx->built.pad_id_used;
    return fx;
  }();
  return *f;
}

// Whole samples, one after another, through `assemble` (today's or the reference).
template <auto assemble>
void BM_Whole(benchmark::State& state) {
  const auto& f = Get();
  const auto& m = f.built.splits[0]->mids[0];
  const auto view = m.tables.View();
  order::Sample sample;
  int64_t i = 0, n = view.num_samples();
  for (auto _ : state) {
    assemble(*m.dataset, view, i++ % n, f.options, &sample);
    benchmark::DoNotOptimize(sample.tokens.data());
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_Assemble(benchmark::State& state) { BM_Whole<order::AssembleSample>(state); }
void BM_AssembleReference(benchmark::State& state) {
  BM_Whole<testing::ReferenceAssembleSample>(state);
}

enum Stage { kOnly, kFirst, kLast };

// One payload slot's fields, as feed::PayloadLayout lays them out for `stage`.
void Fields(benchmark::State& state, Stage stage, int64_t cp) {
  const auto& f = Get();
  const auto& m = f.built.splits[0]->mids[0];
  const auto view = m.tables.View();
  const int64_t L = kSeq / cp;
  std::vector<int64_t> tokens(L), positions(L), labels(L);
  std::vector<float> loss(L);
  order::FieldTargets t;
  if (stage != kLast) {
    t.tokens = tokens.data();
    t.position_ids = positions.data();
  }
  if (stage != kFirst) {
    t.labels = labels.data();
    t.loss_mask = loss.data();
  }
  t.cp_size = cp;
  order::AssemblyScratch scratch;
  int64_t i = 0, n = view.num_samples();
  for (auto _ : state) {
    order::AssembleFields(*m.dataset, view, i++ % n, f.options, t, &scratch);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_FieldsAll(benchmark::State& state) { Fields(state, kOnly, 1); }
void BM_FieldsFirstStage(benchmark::State& state) { Fields(state, kFirst, 1); }
void BM_FieldsLastStage(benchmark::State& state) { Fields(state, kLast, 1); }
void BM_FieldsAllCp2(benchmark::State& state) { Fields(state, kOnly, 2); }

void BM_MemcpyWidenFloor(benchmark::State& state) {
  const auto& f = Get();
  const auto& m = f.built.splits[0]->mids[0];
  const auto view = m.tables.View();
  const auto& ds = *m.dataset;
  std::vector<int64_t> out(kSeq + 1);
  std::vector<int32_t> raw(kSeq + 1);
  int64_t i = 0, n = view.num_samples();
  for (auto _ : state) {
    // The same pieces AssembleSample reads, copied and widened, nothing else.
    const int64_t j = view.ShuffleAt(i++ % n);
    int64_t d = view.SampleDoc(j), o = view.SampleOffset(j), got = 0;
    while (got < kSeq + 1) {
      const int64_t s = view.document_index[d];
      const int64_t len = std::min<int64_t>(ds.sequence_lengths()[s] - o, kSeq + 1 - got);
      std::memcpy(raw.data() + got, ds.GetUnchecked(s, o, len).data, len * 4);
      got += len;
      ++d;
      o = 0;
    }
    for (int64_t k = 0; k <= kSeq; ++k) out[k] = raw[k];
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_Assemble);
BENCHMARK(BM_AssembleReference);
BENCHMARK(BM_FieldsAll);
BENCHMARK(BM_FieldsFirstStage);
BENCHMARK(BM_FieldsLastStage);
BENCHMARK(BM_FieldsAllCp2);
BENCHMARK(BM_MemcpyWidenFloor);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::string floor = "BM_MemcpyWidenFloor";
  gridfeed::bench::RatioReporter reporter(
      std::vector<std::pair<std::string, std::string>>{{"BM_Assemble", floor},
                                                       {"BM_AssembleReference", floor},
                                                       {"BM_FieldsAll", floor},
                                                       {"BM_FieldsFirstStage", floor},
                                                       {"BM_FieldsLastStage", floor},
                                                       {"BM_FieldsAllCp2", floor}});
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
