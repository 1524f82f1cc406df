#include "gridfeed/order/read_schedule.h"

#include <algorithm>

#include "gridfeed/core/check.h"
#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {

Result<DataloaderType> ParseDataloaderType(const std::string& name) {
  if (name == "single") return DataloaderType::kSingle;
  if (name == "cyclic") return DataloaderType::kCyclic;
  return InvalidArgument("--dataloader-type must be single or cyclic, got '" + name + "'");
}

Result<ReadSchedule> ReadSchedule::Create(const ScheduleOptions& options) {
  ReadSchedule s;
  s.o_ = options;
  ScheduleOptions& o = s.o_;
  constexpr int64_t kMax = int64_t{1} << 40;
  if (o.micro_batch_size < 1 || o.micro_batch_size > kMax) {
    return InvalidArgument("--micro-batch-size must be in [1, 2^40]");
  }
  if (o.dp_size < 1 || o.dp_size > (int64_t{1} << 24)) {
    return InvalidArgument("the data-parallel size must be in [1, 2^24]");
  }
  const int64_t step = o.micro_batch_size * o.dp_size;
  if (o.global_batch_size == 0) o.global_batch_size = step;
  if (o.global_batch_size < 0 || o.global_batch_size % step != 0) {
    return InvalidArgument(
        "--global-batch-size " + std::to_string(o.global_batch_size) +
        " is not a positive multiple of --micro-batch-size x DP = " + std::to_string(step));
  }
  if (o.total_samples < 0 || o.start_consumed < 0) {
    return InvalidArgument("the split length and --consumed-samples must be >= 0");
  }
  if (o.start_iteration < 0) {
    s.base_iteration_ = o.start_consumed / o.global_batch_size;
    s.first_offset_ = (o.start_consumed % o.global_batch_size) / step;
  } else {
    s.base_iteration_ = o.start_iteration;
  }
  if (o.type == DataloaderType::kCyclic) {
    // Megatron's random sampler needs at least one full global batch.
    if (o.total_samples < step) {
      return InvalidArgument(
          "--dataloader-type cyclic needs a split of at least micro-batch x "
          "DP = " +
          std::to_string(step) + " samples, the split has " + std::to_string(o.total_samples));
    }
    s.num_steps_ = kEndless;
  } else {
    const int64_t left = std::max<int64_t>(0, o.total_samples - o.start_consumed);
    s.num_steps_ = left / step + (!o.drop_last && left % step != 0 ? 1 : 0);
  }
  return s;
}

std::pair<int64_t, int64_t> ReadSchedule::Place(int64_t step) const {
  const int64_t per = micro_batches_per_iteration();
  const int64_t k = first_offset_ + step;
  return {base_iteration_ + k / per, k % per};
}

int64_t ReadSchedule::FirstStepOf(int64_t iteration) const {
  return (iteration - base_iteration_) * micro_batches_per_iteration() - first_offset_;
}

std::optional<ReadSchedule::Owner> ReadSchedule::OwnerOf(int64_t position) const {
  if (o_.type != DataloaderType::kSingle || position < o_.start_consumed ||
      position >= o_.total_samples) {
    return std::nullopt;
  }
  const int64_t rel = position - o_.start_consumed;
  const Owner owner{rel / samples_per_step(), (rel % samples_per_step()) / o_.micro_batch_size};
  if (owner.step >= num_steps_) return std::nullopt;
  return owner;
}

std::vector<int64_t> ReadSchedule::PositionsOf(const std::vector<int>& dp_ranks) const {
  GRIDFEED_CHECK(o_.type == DataloaderType::kSingle);
  std::vector<int64_t> mine;
  for (int r : dp_ranks) {
    if (r >= 0 && r < o_.dp_size) mine.push_back(r);
  }
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  // Step by step, each chosen rank's micro-batch is one run of positions: the cost is this
  // node's steps x ranks, not the whole schedule's (rank 0 asks once per node).
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_steps_) * mine.size() *
              static_cast<size_t>(o_.micro_batch_size));
  const int64_t per_step = samples_per_step();
  for (int64_t step = 0; step < num_steps_; ++step) {
    const int64_t first = o_.start_consumed + step * per_step;
    for (const int64_t r : mine) {
      const int64_t begin = first + r * o_.micro_batch_size;
      const int64_t end = std::min(begin + o_.micro_batch_size, o_.total_samples);
      for (int64_t p = begin; p < end; ++p) out.push_back(p);
    }
  }
  return out;
}

// A walker's state: the next step, and for cyclic Megatron's per-rank sampler state.
struct ReadSchedule::Walker::State {
  const ReadSchedule* schedule;
  int64_t rank;
  int64_t next = 0;
  // cyclic
  int64_t consumed = 0;
  int64_t epoch = 0;
  std::vector<int64_t> order;  // this rank's remaining indices of the epoch
  size_t pos = 0;

  // MegatronPretrainingRandomSampler.__iter__ at `consumed`.
  void StartEpoch() {
    const auto& o = schedule->o_;
    const int64_t global = o.micro_batch_size * o.dp_size;
    const int64_t active = o.total_samples - o.total_samples % global;
    GRIDFEED_CHECK(active > 0);
    epoch = consumed / active;
    const int64_t current = consumed % active;
    order.clear();
    pos = 0;
    if (o.data_sharding) {
      const int64_t bucket = (o.total_samples / global) * o.micro_batch_size;
      const int64_t offset = rank * bucket;
      const auto perm = TorchRandperm(bucket, static_cast<uint64_t>(epoch));
      for (int64_t k = current / o.dp_size; k < bucket; ++k) order.push_back(offset + perm[k]);
    } else {
      const int64_t full = (o.total_samples / o.micro_batch_size) * o.micro_batch_size;
      const auto perm = TorchRandperm(full, static_cast<uint64_t>(epoch));
      for (int64_t k = current + rank; k < full; k += o.dp_size) order.push_back(perm[k]);
    }
  }

  // The next cyclic micro-batch: an incomplete final group is dropped and the next epoch's
  // iterator starts.
  void NextCyclic(std::vector<int64_t>* out) {
    const auto mbs = static_cast<size_t>(schedule->o_.micro_batch_size);
    if (order.size() - pos < mbs) StartEpoch();
    GRIDFEED_CHECK(order.size() - pos >= mbs);
    out->assign(order.begin() + static_cast<ptrdiff_t>(pos),
                order.begin() + static_cast<ptrdiff_t>(pos + mbs));
    pos += mbs;
  }
};

ReadSchedule::Walker::Walker(std::unique_ptr<State> s) : s_(std::move(s)) {}
ReadSchedule::Walker::Walker(Walker&&) noexcept = default;
ReadSchedule::Walker& ReadSchedule::Walker::operator=(Walker&&) noexcept = default;
ReadSchedule::Walker::~Walker() = default;

ReadSchedule::Walker ReadSchedule::Walk(int64_t dp_rank) const {
  GRIDFEED_CHECK(dp_rank >= 0 && dp_rank < o_.dp_size);
  auto s = std::make_unique<Walker::State>();
  s->schedule = this;
  s->rank = dp_rank;
  s->consumed = o_.start_consumed;
  if (o_.type == DataloaderType::kCyclic) s->StartEpoch();
  return Walker(std::move(s));
}

bool ReadSchedule::Walker::Next(StepBatch* out) {
  State& s = *s_;
  const ReadSchedule& sched = *s.schedule;
  const auto& o = sched.o_;
  if (s.next >= sched.num_steps_) return false;
  out->step = s.next;
  std::tie(out->iteration, out->micro_batch) = sched.Place(s.next);
  out->consumed_before = o.start_consumed + s.next * sched.samples_per_step();
  if (o.type == DataloaderType::kCyclic) {
    s.NextCyclic(&out->positions);
    out->epoch = s.epoch;
    s.consumed += sched.samples_per_step();
  } else {
    out->epoch = 0;
    const int64_t first = out->consumed_before + s.rank * o.micro_batch_size;
    const int64_t last = std::min(o.total_samples, first + o.micro_batch_size);
    out->positions.clear();
    for (int64_t p = first; p < last; ++p) out->positions.push_back(p);
  }
  ++s.next;
  return true;
}

void ReadSchedule::Walker::SkipTo(int64_t step) {
  State& s = *s_;
  if (s.schedule->o_.type == DataloaderType::kSingle) {
    s.next = std::max(s.next, step);
    return;
  }
  StepBatch skipped;
  while (s.next < step && Next(&skipped)) {
  }
}

}  // namespace gridfeed::order
