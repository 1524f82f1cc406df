// Megatron's batch samplers, as pure functions of the cursor (no replay needed to resume).
// Thread safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gridfeed::order {

// MegatronPretrainingSampler: the micro-batches rank `dp_rank` gets, from consumed_samples to
// the end (global batches of mbs * dp; a final partial one is dropped unless !drop_last, then
// every rank gets its slice of it, which may be short or empty).
std::vector<std::vector<int64_t>> PretrainingSamplerBatches(int64_t total_samples,
                                                            int64_t consumed_samples,
                                                            int64_t micro_batch_size,
                                                            int64_t dp_rank, int64_t dp_size,
                                                            bool drop_last);

// MegatronPretrainingRandomSampler iterated like --dataloader-type cyclic.
class RandomSampler {
 public:
  RandomSampler(int64_t total_samples, int64_t consumed_samples, int64_t micro_batch_size,
                int64_t dp_rank, int64_t dp_size, bool data_sharding);

  struct Batch {
    std::vector<int64_t> indices;
    int64_t epoch;
    int64_t consumed_before;
  };
  // The next micro-batch; a new epoch's iterator starts whenever one is exhausted.
  Batch Next();
  int64_t consumed_samples() const { return consumed_; }

 private:
  void StartEpoch();

  int64_t total_, consumed_, mbs_, rank_, dp_;
  bool sharding_;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;  // this rank's remaining indices of the epoch
  size_t pos_ = 0;
};

}  // namespace gridfeed::order
