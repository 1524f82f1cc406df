// The read schedule: which top-level positions of a split DP rank r reads at each micro-batch
// step, and which (iteration, micro-batch) a step is. Megatron's two samplers
// (--dataloader-type): `single` (MegatronPretrainingSampler: every position once, in order,
// global batches of micro-batch x DP) and `cyclic` (MegatronPretrainingRandomSampler iterated
// as Megatron's cyclic_iter: a fresh torch.randperm(seed = epoch) per epoch, with or without
// data sharding). The feeder, the audit and the golden sampler tests all read through here.
//
// Cyclic depends on where reading (re)started, exactly as Megatron's does: a sampler created at
// `start_consumed` derives its epoch and offset from it; a rank whose epoch runs out starts the
// next epoch from its own consumed count. Thread safe (const); a Walker is not.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::order {

enum class DataloaderType { kSingle, kCyclic };
// "single" | "cyclic" (the values of --dataloader-type).
Result<DataloaderType> ParseDataloaderType(const std::string& name);

struct ScheduleOptions {
  DataloaderType type = DataloaderType::kSingle;
  int64_t total_samples = 0;  // the split's length
  int64_t micro_batch_size = 1;
  int64_t dp_size = 1;
  int64_t global_batch_size = 0;  // 0 = micro-batch x DP; else a multiple of it
  int64_t start_consumed = 0;     // global samples consumed when reading (re)starts
  // Iteration of the first step (a checkpoint's); -1 = derived from start_consumed / GBS.
  int64_t start_iteration = -1;
  bool drop_last = true;      // single: a final partial global batch is dropped
  bool data_sharding = true;  // cyclic: a bucket per DP rank (Megatron's default)
};

// One micro-batch of one DP rank.
struct StepBatch {
  int64_t step = 0;  // micro-batch steps since the start
  int64_t iteration = 0, micro_batch = 0;
  int64_t consumed_before = 0;  // global samples consumed before this step
  int64_t epoch = 0;            // cyclic: the sampler's epoch
  std::vector<int64_t> positions;
};

class ReadSchedule {
 public:
  // InvalidArgument for sizes that do not fit (names the flag).
  static Result<ReadSchedule> Create(const ScheduleOptions& options);

  // The options as given (global_batch_size filled in): Create(options()) plans the same.
  const ScheduleOptions& options() const { return o_; }
  int64_t samples_per_step() const { return o_.micro_batch_size * o_.dp_size; }
  int64_t micro_batches_per_iteration() const { return o_.global_batch_size / samples_per_step(); }
  // Steps from the start: single until the split ends; cyclic never ends.
  int64_t num_steps() const { return num_steps_; }
  static constexpr int64_t kEndless = std::numeric_limits<int64_t>::max();
  // The (iteration, micro-batch) of a step.
  std::pair<int64_t, int64_t> Place(int64_t step) const;
  // The first step of `iteration` (may be negative when before the start).
  int64_t FirstStepOf(int64_t iteration) const;

  // Single only: the step and DP rank that read `position`; none outside the schedule.
  struct Owner {
    int64_t step, dp_rank;
  };
  std::optional<Owner> OwnerOf(int64_t position) const;
  // Single only: every position the DP ranks `dp_ranks` read from the start on, sorted.
  std::vector<int64_t> PositionsOf(const std::vector<int>& dp_ranks) const;

  // One DP rank's batches in order.
  class Walker {
   public:
    Walker(Walker&&) noexcept;
    Walker& operator=(Walker&&) noexcept;
    ~Walker();
    // The next step's batch; false after the last step.
    bool Next(StepBatch* out);
    // Continues at `step` (>= the next one): arithmetic for single, a walk for cyclic.
    void SkipTo(int64_t step);

   private:
    friend class ReadSchedule;
    struct State;
    explicit Walker(std::unique_ptr<State> s);
    std::unique_ptr<State> s_;
  };
  Walker Walk(int64_t dp_rank) const;

 private:
  ReadSchedule() = default;
  ScheduleOptions o_;
  int64_t num_steps_ = 0;
  int64_t base_iteration_ = 0;  // iteration of the start
  int64_t first_offset_ = 0;    // micro-batches of the first iteration before the start
};

}  // namespace gridfeed::order
