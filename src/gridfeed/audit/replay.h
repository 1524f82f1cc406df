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
  // The order of a ledger's configuration, read with the schedules of its segments (every
  // start and resume of the run, in order). InvalidArgument for a version-1 ledger (none).
  static Result<std::unique_ptr<Replay>> ForLedger(const Ledger& ledger);

  // The full schedule a segment line describes, for this order.
  Result<order::ReadSchedule> ScheduleFor(const order::ScheduleOptions& segment) const;

  // The record of `position` as (iteration, micro_batch, dp_rank) read it.
  order::SampleRecord Record(int64_t position, int64_t iteration, int64_t micro_batch,
                             int64_t dp_rank) const;
  // The micro-batches `dp_rank` read in iterations [first, last), in order (full ones only).
  // Each iteration is read with the last schedule that started at or before it.
  std::vector<order::StepBatch> Batches(int64_t first, int64_t last, int64_t dp_rank) const;
  // Micro-batch steps the schedules hold in iterations [first, last) (per DP rank).
  int64_t StepsIn(int64_t first, int64_t last) const;
  // The largest DP size of the schedules.
  int64_t max_dp_size() const;
  const order::OrderView& view() const { return *view_; }
  int64_t train_length() const { return view_->length(order::Split::kTrain); }
  int64_t seq_length() const { return options_.data.seq_length; }

 private:
  Replay() = default;
  // The iterations of [first, last) that schedule i reads: from its start until a later
  // schedule starts.
  std::pair<int64_t, int64_t> Governed(size_t i, int64_t first, int64_t last) const;
  config::JobOptions options_;
  std::unique_ptr<order::BuiltOrder> built_;
  order::OrderView* view_ = nullptr;
  std::vector<std::unique_ptr<order::ReadSchedule>> schedules_;  // in the order they started
};

struct VerifyReport {
  bool ok = false;
  int64_t records = 0;
  int64_t consumed = 0;           // positions [0, consumed) covered exactly once
  bool exactly_once = true;       // false for cyclic orders (positions repeat every epoch)
  bool schedule_checked = false;  // who read what when (ledger version 2)
  std::string first_difference;   // empty when ok
};

// Recomputes every ledger record from the ledger's own configuration: the fingerprint line
// against the configuration text, each record's contents, and (version 2) that each record's
// iteration, micro-batch, DP rank, file and position are what the segment's read schedule
// gives; then that every global position up to the cursor was read exactly once. A ledger
// without records proves nothing and is reported as such.
Result<VerifyReport> Verify(const Ledger& ledger);

struct SourceAccount {
  std::string prefix;
  double weight = 0;    // target share (the blend's weight)
  int64_t samples = 0;  // consumed
  int64_t tokens = 0;
  double share = 0;   // samples / all samples
  double epochs = 0;  // samples / samples per epoch of the source's split
};

// One source within one stage of a mixture schedule.
struct StageSourceAccount {
  int64_t samples = 0;  // consumed at the stage's positions
  int64_t tokens = 0;
  double share = 0;   // samples / the stage's consumed samples
  double target = 0;  // the schedule's share over the same positions (ramps and caps included)
  double epochs = 0;  // the source's epochs consumed by the end of the stage (cumulative)
};

// A stage of a mixture schedule: positions [begin, end) of the train order; the ledger covered
// [begin, reached) of them (reached == begin: not reached yet).
struct StageAccount {
  std::string name;
  int64_t begin = 0, end = 0, reached = 0;
  int64_t first_iteration = -1;  // the first iteration that read one of its positions
  std::vector<StageSourceAccount> sources;
};

// Per blend source up to iteration `until` (exclusive; -1 = everything in the ledger).
// `series[k]` is source k's cumulative tokens after each iteration. `stages`: per stage of a
// mixture schedule (empty without one), by each record's position.
struct Accounting {
  std::vector<SourceAccount> sources;
  std::vector<int64_t> iterations;
  std::vector<std::vector<int64_t>> series;
  std::vector<StageAccount> stages;
};
Result<Accounting> Account(const Ledger& ledger, int64_t until);

}  // namespace gridfeed::audit
