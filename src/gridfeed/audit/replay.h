// Offline order reproduction: rebuild the tables from a configuration alone (no MPI, no GPU)
// and recompute what any step of any DP rank read; verify a ledger against it and prove that
// every global position up to the cursor was consumed exactly once; per-source accounting.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gridfeed/audit/ledger.h"
#include "gridfeed/config/data_options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/sample.h"

namespace gridfeed::audit {

// The data options a canonical configuration text (ledger or checkpoint) describes.
Result<config::DataOptions> DataOptionsFromCanonical(const std::string& canonical);

class Replay {
 public:
  static Result<std::unique_ptr<Replay>> Create(const config::DataOptions& options);

  // The record of global position `position` read at (iteration, micro_batch) by `dp_rank`.
  order::SampleRecord Record(int64_t position, int64_t iteration, int64_t micro_batch,
                             int64_t dp_rank) const;
  // Positions of every (micro-batch, sample) of `dp_rank` in iterations [first, last).
  // Rows are micro-batches in order; REQUIRES gbs % (mbs * dp) == 0.
  std::vector<std::vector<int64_t>> Positions(int64_t first, int64_t last, int64_t dp_rank,
                                              int64_t dp, int64_t mbs, int64_t gbs) const;
  const order::SplitDataset& train() const { return *built_.splits[0]; }
  int64_t seq_length() const { return options_.seq_length; }

 private:
  Replay() = default;
  config::DataOptions options_;
  order::BuiltDatasets built_;
  order::SampleOptions sample_options_;
};

struct VerifyReport {
  bool ok = false;
  int64_t records = 0;
  int64_t consumed = 0;          // positions [0, consumed) covered exactly once
  std::string first_difference;  // empty when ok
};

// Recomputes every ledger record from the ledger's own configuration.
Result<VerifyReport> Verify(const Ledger& ledger);

struct SourceAccount {
  std::string prefix;
  double weight = 0;    // target share (the blend's weight)
  int64_t samples = 0;  // consumed
  int64_t tokens = 0;
  double share = 0;   // samples / all samples
  double epochs = 0;  // samples / samples per epoch of the source's split
};

// Per blend source up to iteration `until` (exclusive; -1 = everything in the ledger).
// `series[k]` is source k's cumulative tokens after each iteration.
struct Accounting {
  std::vector<SourceAccount> sources;
  std::vector<int64_t> iterations;
  std::vector<std::vector<int64_t>> series;
};
Result<Accounting> Account(const Ledger& ledger, int64_t until);

}  // namespace gridfeed::audit
