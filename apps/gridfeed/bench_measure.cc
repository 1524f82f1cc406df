#include "bench_measure.h"

#include <sys/resource.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gridfeed/core/memory_usage.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/order/assembly_floor.h"
#include "gridfeed/order/image_writer.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/registry.h"

namespace gridfeed::app {
namespace {

// The resident high-water mark: VmHWM, else getrusage's ru_maxrss (kB on Linux).
uint64_t PeakRssBytes() {
  if (const int64_t hwm = PeakResidentBytes(); hwm > 0) return static_cast<uint64_t>(hwm);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

order::Split SplitNamed(const std::string& name) {
  if (name == "valid") return order::Split::kValid;
  if (name == "test") return order::Split::kTest;
  return order::Split::kTrain;
}

// Read() and the floor over consecutive positions, in blocks of about 64 MiB of tokens (more
// than a CPU cache holds, little enough to stay in the page cache): each block is read and
// copied once untimed, then timed, so both are measured on data in memory and on their own
// mapping's second touch. The untimed Read() keeps the records the floor locates samples by.
// `samples` 0: blocks until about two seconds have passed (a block is cut short at that time).
void TimeAssembly(const order::OrderView& view, order::AssemblyFloor& floor, order::Split split,
                  int64_t length, int64_t samples, AssemblyFacts* out) {
  const int64_t block =
      std::max<int64_t>(64, (int64_t{64} << 20) / (floor.tokens_per_sample() * 4));
  order::Sample sample;
  std::vector<order::SampleRecord> records;
  int64_t n = 0, sink = 0;
  Stopwatch total, watch;
  auto more = [&](int64_t m) {  // whether the block takes another sample
    if (samples > 0) return m < block && n + m < samples;
    return m < block && (m % 16 != 0 || total.Seconds() < 2.0);
  };
  do {
    records.clear();
    for (int64_t m = 0; more(m); ++m) {
      records.push_back(view.Read(split, (n + m) % length, &sample, false));
    }
    const auto m = static_cast<int64_t>(records.size());
    for (int64_t i = 0; i < m; ++i) sink ^= floor.Copy(split, (n + i) % length, records[i]);
    watch.Lap();
    for (int64_t i = 0; i < m; ++i) view.Read(split, (n + i) % length, &sample, false);
    out->read_seconds += watch.Lap();
    for (int64_t i = 0; i < m; ++i) sink ^= floor.Copy(split, (n + i) % length, records[i]);
    out->floor_seconds += watch.Lap();
    n += m;
  } while (samples > 0 ? n < samples : total.Seconds() < 2.0);
  asm volatile("" : : "r"(sink) : "memory");  // the floor's copies are observable
  out->samples = n;
  out->split_length = length;
  out->tokens_per_sample = floor.tokens_per_sample();
}

// What a projection of many producers scales (BuildFacts): the build's phases, each divided
// store's index bytes, and a node image's bytes per held sample, from the node image of every
// 16th run of 64 positions (a DP share's shape) next to an empty one.
Status MeasureSections(const config::JobOptions& options, const order::Pipeline& pipeline,
                       order::BuiltOrder& built, BuildFacts* b) {
  b->phases = built.Phases();
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<std::string> stores, pipeline.DividedStores());
  for (const auto& s : stores) {
    const auto bytes = io::FileSize(s + ".idx");
    b->store_index_bytes.push_back(bytes.ok() ? static_cast<uint64_t>(*bytes) : 0);
  }
  const order::Split split = SplitNamed(options.feed.split_name);
  b->split_length = built.view().length(split);
  std::vector<int64_t> held;
  for (int64_t p = 0; p < b->split_length; ++p) {
    if ((p / 64) % 16 == 0) held.push_back(p);
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto empty, built.NodeImage(split, {}, false));
  if (!empty || held.empty()) return Status::Ok();  // no node images
  Stopwatch making;
  GRIDFEED_ASSIGN_OR_RETURN(auto some, built.NodeImage(split, held, false));
  b->node_image_seconds_per_sample = making.Seconds() / static_cast<double>(held.size());
  b->node_image_fixed_bytes = empty->size();
  b->node_image_bytes_per_sample =
      static_cast<double>(some->size() - empty->size()) / static_cast<double>(held.size());
  return Status::Ok();
}

Status Measure(const config::JobOptions& options, int64_t samples, BenchReport* report) {
  const order::PipelineKind& kind = order::KindOf(options.data);
  if (kind.floor == nullptr || kind.table_bytes == nullptr) {
    return InvalidArgument(kind.no_bench != nullptr ? kind.no_bench : "bench: no assembly floor");
  }
  BuildFacts& b = report->build;
  b.peak_since_build = ResetPeakResident();
  b.rss_before_bytes = static_cast<uint64_t>(std::max<int64_t>(0, ResidentBytes()));
  Stopwatch watch;
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<order::Pipeline> pipeline,
                            order::Pipeline::For(options));
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<order::BuiltOrder> built, pipeline->Build());
  b.build_seconds = watch.Lap();
  GRIDFEED_RETURN_IF_ERROR(MeasureSections(options, *pipeline, *built, &b));
  watch.Lap();
  // As the feeder does: the writer frees each table once it is in the image.
  std::unique_ptr<order::ImageWriter> writer = built->TakeImage();
  b.image_bytes = writer->size();
  std::unique_ptr<std::byte[]> image(new std::byte[b.image_bytes]);  // 16-byte aligned
  writer->WriteTo(image.get());
  writer.reset();
  built.reset();
  b.image_write_seconds = watch.Lap();
  b.peak_rss_bytes = PeakRssBytes();
  const std::span<const std::byte> bytes(image.get(), b.image_bytes);
  b.image_digest = order::ImageDigest(bytes);
  GRIDFEED_ASSIGN_OR_RETURN(b.table_bytes, kind.table_bytes(options, bytes));

  // A reader's view of the image. The build checked the token stores in full on this process,
  // so their structure suffices (as for a reader whose node leader checked them).
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<order::OrderView> view, pipeline->ViewImage(bytes));
  GRIDFEED_RETURN_IF_ERROR(view->OpenTokenStores(true));
  const order::Split split = SplitNamed(options.feed.split_name);
  const int64_t length = view->length(split);
  if (length == 0) {
    return FailedPrecondition("the " + options.feed.split_name +
                              " split is empty with this --split: nothing to read");
  }
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<order::AssemblyFloor> floor,
                            kind.floor(options, bytes));

  TimeAssembly(*view, *floor, split, length, samples, &report->assembly);
  return Status::Ok();
}

}  // namespace

Status MeasureBuildAndAssembly(const config::JobOptions& options, int64_t samples,
                               BenchReport* report) {
  report->pipeline = order::KindOf(options.data).name;
  report->split = options.feed.split_name;
  report->seq_length = options.data.seq_length;
  try {
    return Measure(options, samples, report);
  } catch (const std::bad_alloc&) {
    return Internal("out of memory while building the tables or writing their image");
  } catch (const std::exception& e) {
    return Internal(std::string("bench: ") + e.what());
  }
}

}  // namespace gridfeed::app
