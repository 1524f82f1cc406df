// Offline order reproduction: rebuild a data order from its options alone (no MPI, no GPU)
// through the same pipeline, table view and read schedule the feeder uses, and recompute what
// any step of any DP rank read; verify a ledger against it and prove that every global position
// up to the cursor was consumed exactly once; per-source accounting.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gridfeed/audit/ledger.h"
#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/read_schedule.h"

namespace gridfeed::audit {

class Replay {
 public:
  // Builds the train split of `options.data`; the schedule is the one a run with the batch
  // options and --data-parallel-size of `options` follows from sample 0.
  static Result<std::unique_ptr<Replay>> Create(const config::JobOptions& options);

  // The record of `position` as (iteration, micro_batch, dp_rank) read it.
  order::SampleRecord Record(int64_t position, int64_t iteration, int64_t micro_batch,
                             int64_t dp_rank) const;
  // The micro-batches `dp_rank` read in iterations [first, last), in order (full ones only).
  std::vector<order::StepBatch> Batches(int64_t first, int64_t last, int64_t dp_rank) const;
  const order::OrderView& view() const { return *view_; }
  const order::ReadSchedule& schedule() const { return *schedule_; }
  int64_t train_length() const { return view_->length(order::Split::kTrain); }
  int64_t seq_length() const { return options_.data.seq_length; }

 private:
  Replay() = default;
  config::JobOptions options_;
  std::unique_ptr<order::BuiltOrder> built_;
  order::OrderView* view_ = nullptr;
  std::unique_ptr<order::ReadSchedule> schedule_;
};

struct VerifyReport {
  bool ok = false;
  int64_t records = 0;
  int64_t consumed = 0;          // positions [0, consumed) covered exactly once
  bool exactly_once = true;      // false for cyclic orders (positions repeat every epoch)
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
