#include "bench_measure.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "bench_image.h"
#include "gridfeed/core/parse.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::app {
namespace {

// A "Vm...:  N kB" line of /proc/self/status in bytes; 0 when absent.
uint64_t StatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits += c;
    }
    const auto kb = ParseInt64(digits);
    return kb ? static_cast<uint64_t>(*kb) * 1024 : 0;
  }
  return 0;
}

// The resident high-water mark: VmHWM, else getrusage's ru_maxrss (kB on Linux).
uint64_t PeakRssBytes() {
  if (const uint64_t hwm = StatusBytes("VmHWM"); hwm > 0) return hwm;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

// Linux resets VmHWM to the current resident set on "5" > /proc/self/clear_refs (since 4.0),
// so the mark covers the build alone rather than anything the process did before.
bool ResetPeakRss() {
  const int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok;
}

order::Split SplitNamed(const std::string& name) {
  if (name == "valid") return order::Split::kValid;
  if (name == "test") return order::Split::kTest;
  return order::Split::kTrain;
}

Status Measure(const config::JobOptions& options, int64_t samples, BenchReport* report) {
  BuildFacts& b = report->build;
  b.peak_since_build = ResetPeakRss();
  b.rss_before_bytes = StatusBytes("VmRSS");
  Stopwatch watch;
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<order::Pipeline> pipeline,
                            order::Pipeline::For(options));
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<order::BuiltOrder> built, pipeline->Build());
  b.build_seconds = watch.Lap();
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
  GRIDFEED_ASSIGN_OR_RETURN(b.table_bytes, TableBytesOf(options, bytes));

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
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<AssemblyFloor> floor,
                            MakeAssemblyFloor(options, bytes));

  // Each pass runs twice, timed the second time, so neither pays first touches of its mapping.
  // The first Read pass sizes the count and keeps the records the floor locates samples by.
  order::Sample sample;
  std::vector<order::SampleRecord> records;
  int64_t n = 0;
  Stopwatch warm;
  while (samples > 0 ? n < samples : (n % 64 != 0 || warm.Seconds() < 1.0)) {
    order::SampleRecord r = view->Read(split, n % length, &sample, false);
    if (n < length) records.push_back(r);
    ++n;
  }
  watch.Lap();
  for (int64_t i = 0; i < n; ++i) view->Read(split, i % length, &sample, false);
  report->assembly.read_seconds = watch.Lap();
  int64_t sink = 0;
  for (int pass = 0; pass < 2; ++pass) {
    watch.Lap();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = i % length;
      sink ^= floor->Copy(split, p, records[static_cast<size_t>(p)]);
    }
    report->assembly.floor_seconds = watch.Lap();
  }
  asm volatile("" : : "r"(sink) : "memory");  // the floor's copies are observable
  report->assembly.samples = n;
  report->assembly.split_length = length;
  report->assembly.tokens_per_sample = floor->tokens_per_sample();
  return Status::Ok();
}

}  // namespace

Status MeasureBuildAndAssembly(const config::JobOptions& options, int64_t samples,
                               BenchReport* report) {
  report->pipeline = options.data.is_olmo()      ? "olmo"
                     : options.data.is_mixture() ? "mixture"
                                                 : "megatron";
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
