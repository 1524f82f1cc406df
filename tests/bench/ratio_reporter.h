// A Google Benchmark reporter that, after the normal console output, prints each benchmark's
// time as a ratio to a floor benchmark measured in the same run.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace gridfeed::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // pairs: {benchmark name prefix, floor name prefix}.
  explicit RatioReporter(std::vector<std::pair<std::string, std::string>> pairs)
      : pairs_(std::move(pairs)) {}
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
  std::map<std::string, double> seconds_per_iter_;
};

}  // namespace gridfeed::bench
