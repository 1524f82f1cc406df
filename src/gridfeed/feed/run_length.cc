#include "gridfeed/feed/run_length.h"

#include <string>

#include "gridfeed/order/read_schedule.h"

namespace gridfeed::feed {

Status CheckTrainItersFit(const Feeder& feeder, int64_t train_iters) {
  const order::ReadSchedule& schedule = feeder.schedule();
  const int64_t first = feeder.resumed_iteration();
  const int64_t per_iteration = schedule.micro_batches_per_iteration();
  const int64_t steps = schedule.num_steps();
  if (train_iters <= first || steps == order::ReadSchedule::kEndless || per_iteration <= 0) {
    return Status::Ok();
  }
  const int64_t iterations = train_iters - first;
  if (iterations <= steps / per_iteration) return Status::Ok();
  const int64_t global_batch = schedule.options().global_batch_size;
  const int64_t last = first + steps / per_iteration;  // the first iteration without data
  // Iterations and batch are each below 2^40 (the option table), their product may not be.
  int64_t need = 0;
  const std::string needed = __builtin_mul_overflow(iterations, global_batch, &need)
                                 ? "more than 2^63"
                                 : std::to_string(need);
  return FailedPrecondition(
      "--train-iters " + std::to_string(train_iters) + " needs " + needed + " samples (" +
      std::to_string(iterations) + " iterations of global batch " + std::to_string(global_batch) +
      " from iteration " + std::to_string(first) + "), but the " +
      feeder.options().feed.split_name + " split holds " +
      std::to_string(steps / per_iteration * global_batch) + " from there (" +
      std::to_string(feeder.split_length()) + " in the split, " +
      std::to_string(schedule.options().start_consumed) +
      " consumed): the data would run out at iteration " + std::to_string(last) +
      "; lower --train-iters to at most " + std::to_string(last) +
      " or give the split more samples (--train-samples, or a longer mixture schedule)");
}

}  // namespace gridfeed::feed
