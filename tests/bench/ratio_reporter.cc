#include "ratio_reporter.h"

#include <cstdio>

namespace gridfeed::bench {

void RatioReporter::ReportRuns(const std::vector<Run>& runs) {
  ConsoleReporter::ReportRuns(runs);
  for (const auto& r : runs) {
    if (r.run_type != Run::RT_Iteration || r.iterations == 0) continue;
    seconds_per_iter_[r.benchmark_name()] = r.real_accumulated_time / r.iterations;
  }
}

void RatioReporter::Finalize() {
  ConsoleReporter::Finalize();
  std::printf("\nratio to floor (same run; 1.0 = as fast as the floor):\n");
  for (const auto& [name, floor] : pairs_) {
    for (const auto& [bench_name, t] : seconds_per_iter_) {
      if (bench_name.rfind(name, 0) != 0) continue;
      std::string floor_name = floor + bench_name.substr(name.size());
      auto it = seconds_per_iter_.find(floor_name);
      if (it == seconds_per_iter_.end() || it->second <= 0) continue;
      std::printf("  %-40s %6.2fx  (%s)\n", bench_name.c_str(), t / it->second, floor_name.c_str());
    }
  }
}

}  // namespace gridfeed::bench
