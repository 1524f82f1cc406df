#include "gridfeed/order/sampler.h"

#include <cstddef>

#include "gridfeed/core/check.h"
#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {

std::vector<std::vector<int64_t>> PretrainingSamplerBatches(int64_t total, int64_t consumed,
                                                            int64_t mbs, int64_t rank, int64_t dp,
                                                            bool drop_last) {
  std::vector<std::vector<int64_t>> out;
  const int64_t global = mbs * dp;
  int64_t start = consumed;
  for (; start + global <= total; start += global) {
    std::vector<int64_t> b;
    for (int64_t i = start + rank * mbs; i < start + (rank + 1) * mbs; ++i) b.push_back(i);
    out.push_back(std::move(b));
  }
  if (!drop_last && start < total) {
    std::vector<int64_t> b;
    for (int64_t i = start + rank * mbs; i < std::min(total, start + (rank + 1) * mbs); ++i) {
      b.push_back(i);
    }
    out.push_back(std::move(b));
  }
  return out;
}

RandomSampler::RandomSampler(int64_t total, int64_t consumed, int64_t mbs, int64_t rank, int64_t dp,
                             bool sharding)
    : total_(total), consumed_(consumed), mbs_(mbs), rank_(rank), dp_(dp), sharding_(sharding) {
  StartEpoch();
}

void RandomSampler::StartEpoch() {
  const int64_t global = mbs_ * dp_;
  const int64_t active = total_ - total_ % global;
  GRIDFEED_CHECK(active > 0);
  epoch_ = consumed_ / active;
  const int64_t current = consumed_ % active;
  order_.clear();
  pos_ = 0;
  if (sharding_) {
    const int64_t bucket = (total_ / global) * mbs_;
    const int64_t offset = rank_ * bucket;
    auto perm = TorchRandperm(bucket, static_cast<uint64_t>(epoch_));
    for (int64_t k = current / dp_; k < bucket; ++k) order_.push_back(offset + perm[k]);
  } else {
    const int64_t full = (total_ / mbs_) * mbs_;
    auto perm = TorchRandperm(full, static_cast<uint64_t>(epoch_));
    for (int64_t k = current + rank_; k < full; k += dp_) order_.push_back(perm[k]);
  }
}

RandomSampler::Batch RandomSampler::Next() {
  // An incomplete final group is dropped and the next epoch's iterator starts.
  if (order_.size() - pos_ < static_cast<size_t>(mbs_)) StartEpoch();
  GRIDFEED_CHECK(order_.size() - pos_ >= static_cast<size_t>(mbs_));
  Batch b;
  b.epoch = epoch_;
  b.consumed_before = consumed_;
  b.indices.assign(order_.begin() + static_cast<ptrdiff_t>(pos_),
                   order_.begin() + static_cast<ptrdiff_t>(pos_ + mbs_));
  pos_ += static_cast<size_t>(mbs_);
  consumed_ += mbs_ * dp_;
  return b;
}

}  // namespace gridfeed::order
