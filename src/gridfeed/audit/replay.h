// Offline order reproduction: rebuild a data order from its options alone (no MPI, no GPU)
// through the same pipeline, table view and read schedule the feeder uses, and recompute what
// any step of any DP rank read; verify a ledger against it and prove that every global position
// up to the cursor was consumed exactly once; per-source accounting.
#pragma once

#include <functional>
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
  // The orders of a ledger's configurations (one per entry of ledger.schedules: an amended
  // mixture has several), read with its first segment's schedule (or a DP 1, micro-batch 1 one
  // for a version-1 ledger), or with `geometry`'s batch and grid options from sample 0 when
  // given (what `audit replay --ledger` with --data-parallel-size asks).
  static Result<std::unique_ptr<Replay>> OrdersOf(const Ledger& ledger,
                                                  const config::JobOptions* geometry = nullptr);

  // The full schedule a segment line describes, for the order in force at its start.
  Result<order::ReadSchedule> ScheduleFor(const order::ScheduleOptions& segment) const;

  // The record of `position` as (iteration, micro_batch, dp_rank) read it, from the order in
  // force at `position`; RecordUnder: from order `i` (REQUIRES position < OrderLength(i)).
  order::SampleRecord Record(int64_t position, int64_t iteration, int64_t micro_batch,
                             int64_t dp_rank) const;
  order::SampleRecord RecordUnder(size_t i, int64_t position, int64_t iteration,
                                  int64_t micro_batch, int64_t dp_rank) const;
  // Fetch-ordered orders (OrderView::fetch_ordered: FIM's DataLoader streams): the record of
  // `position` that `dp_rank` read at `step` of `schedule` (a run's schedule from its start),
  // recomputed by walking that DP rank's micro-batches from the run's first step, so the view
  // draws as the run's reader did. A later step of the same walk continues it (records in a
  // DP rank's order cost one walk). InvalidArgument when that micro-batch lacks `position`.
  Result<order::SampleRecord> WalkedRecord(const order::ReadSchedule& schedule, int64_t dp_rank,
                                           int64_t step, int64_t position) const;
  bool fetch_ordered() const { return orders_.back().view->fetch_ordered(); }
  // Orders (configurations) and the position each is in force from; the one at `position`.
  size_t num_orders() const { return orders_.size(); }
  int64_t OrderFrom(size_t i) const { return orders_[i].from; }
  int64_t OrderLength(size_t i) const;
  size_t OrderAt(int64_t position) const;
  // The micro-batches `dp_rank` read in iterations [first, last), in order (full ones only).
  // Each iteration is read with the last schedule that started at or before it.
  std::vector<order::StepBatch> Batches(int64_t first, int64_t last, int64_t dp_rank) const;
  // Micro-batch steps the schedules hold in iterations [first, last) (per DP rank).
  int64_t StepsIn(int64_t first, int64_t last) const;
  // The largest DP size of the schedules.
  int64_t max_dp_size() const;
  // The last order's view and train length (the one in force at the end).
  const order::OrderView& view() const { return *orders_.back().view; }
  int64_t train_length() const { return OrderLength(orders_.size() - 1); }
  int64_t seq_length() const { return options_.data.seq_length; }

 private:
  struct Order {
    int64_t from = 0;
    std::unique_ptr<order::BuiltOrder> built;
    order::OrderView* view = nullptr;
  };
  Replay() = default;
  // The iterations of [first, last) that schedule i reads: from its start until a later
  // schedule starts.
  std::pair<int64_t, int64_t> Governed(size_t i, int64_t first, int64_t last) const;
  // The walk WalkedRecord continues (one thread: Replay is not thread safe).
  struct Walk {
    const order::ReadSchedule* schedule = nullptr;
    int64_t dp_rank = -1, step = -1;  // the micro-batch read last
    std::unique_ptr<order::ReadSchedule::Walker> walker;
    std::vector<order::SampleRecord> records;  // its records
  };
  mutable Walk walk_;
  config::JobOptions options_;                                   // the first order's
  std::vector<Order> orders_;                                    // by `from`, the first from 0
  std::vector<std::unique_ptr<order::ReadSchedule>> schedules_;  // in the order they started
};

struct VerifyReport {
  bool ok = false;
  int64_t records = 0;
  int64_t consumed = 0;           // positions [from, from + consumed) covered exactly once
  bool exactly_once = true;       // false for cyclic orders (positions repeat every epoch)
  bool schedule_checked = false;  // who read what when (ledger version 2)
  int64_t schedules = 1;          // configurations checked (amended mixture schedules: > 1)
  // Mixture schedules: each stream (a source; per seq length when stages set their own) whose
  // samples [first, first + samples) were each read exactly once, by source then length
  // (first is 0 unless the ledger began past position 0).
  struct Stream {
    int64_t source = 0;
    int64_t seq_length = 0;  // 0: the run has one length
    int64_t first = 0;
    int64_t samples = 0;
  };
  std::vector<Stream> streams;
  std::string first_difference;  // empty when ok
};

// Recomputes every ledger record from the ledger's own configurations: each fingerprint line
// against its configuration text, each record's contents under the configuration in force at
// its position and under every later one (an amendment kept the order before it, so each must
// agree there: this re-proves it), and (version >= 2) that each record's iteration,
// micro-batch, DP rank, file and position are what its run's read schedule gives and that the
// run was under the schedule in force at the position; then that every global position up to
// the cursor was read exactly once and, for mixture schedules, that each source's stream
// samples [0, n) were read exactly once. A ledger without records proves nothing and is
// reported as such. The proof starts at position `from`: a ledger whose first run began
// elsewhere (a version-2 ledger's segments say where; --consumed-samples or a resume into a
// new ledger) fails, naming where it begins, as nothing else in it says where it should.
Result<VerifyReport> Verify(const Ledger& ledger, int64_t from = 0);

struct SourceAccount {
  std::string prefix;
  double weight = 0;  // target share over the whole order (the blend's weight)
  // Target share over the positions counted (through `until`): a mixture schedule's cumulative
  // targets there, a blend's weight otherwise.
  double target = 0;
  int64_t samples = 0;  // consumed
  int64_t tokens = 0;
  double share = 0;  // samples / all samples
  // samples / samples per epoch of the source's split (a sample of another seq length counts
  // as its length over the epoch's)
  double epochs = 0;
};

// A source's share against its target over windows of consecutive iterations of a stage.
struct WindowDeviation {
  double deviation = 0;          // |share - target|, the largest over the windows
  double share = 0, target = 0;  // in that window
  int64_t first_iteration = -1, last_iteration = -1;  // that window (-1: none)
};

// What one iteration read of a stage: positions [begin, end), samples per source.
struct IterationReads {
  int64_t iteration = 0;
  int64_t begin = 0, end = 0;
  std::vector<int64_t> counts;
};

// Shares over the trailing window of up to `window` reads ending at each read, per source:
// share = the source's samples / all samples in the window; target = (T(b) - T(a)) / (b - a)
// over the window's positions [a, b), T = cumulative_target(source, q) (target samples in
// [0, q)). `largest`: the largest |share - target| over the full windows (every window of
// `window` consecutive reads; the one window of all reads when there are fewer), the first on
// ties. REQUIRES window >= 1.
struct WindowShares {
  std::vector<std::vector<double>> share, target;  // [source][read]
  std::vector<WindowDeviation> largest;            // [source]
};
WindowShares ComputeWindowShares(const std::vector<IterationReads>& reads, int64_t window,
                                 size_t num_sources,
                                 const std::function<double(size_t, int64_t)>& cumulative_target);

// One source within one stage of a mixture schedule.
struct StageSourceAccount {
  int64_t samples = 0;  // consumed at the stage's positions
  int64_t tokens = 0;
  double share = 0;        // samples / the stage's consumed samples
  double target = 0;       // the schedule's share over the same positions (ramps and caps included)
  double epochs = 0;       // the source's epochs consumed by the end of the stage (cumulative)
  WindowDeviation window;  // over windows of Accounting::window iterations of the stage
  std::vector<double> share_series, target_series;  // per StageAccount::iterations
};

// A stage of a mixture schedule: positions [begin, end) of the train order; the ledger covered
// [begin, reached) of them (reached == begin: not reached yet).
struct StageAccount {
  std::string name;
  int64_t begin = 0, end = 0, reached = 0;
  int64_t first_iteration = -1;     // the first iteration that read one of its positions
  std::vector<int64_t> iterations;  // the iterations that read its positions, in order
  std::vector<StageSourceAccount> sources;
};

// Per blend source up to iteration `until` (exclusive; -1 = everything in the ledger).
// `series[k]` is source k's cumulative tokens after each iteration. `stages`: per stage of a
// mixture schedule (empty without one), by each record's position: the stages of the last
// schedule (an amended ledger's latest), the targets of the schedule in force at each position
// (ComputeWindowShares over each stage's iterations, `window` of them; REQUIRES window >= 1).
struct Accounting {
  std::vector<SourceAccount> sources;
  std::vector<int64_t> iterations;
  std::vector<std::vector<int64_t>> series;
  int64_t window = 0;
  std::vector<StageAccount> stages;
};
Result<Accounting> Account(const Ledger& ledger, int64_t until, int64_t window = 100);

}  // namespace gridfeed::audit
