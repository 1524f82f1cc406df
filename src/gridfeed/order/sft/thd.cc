#include "gridfeed/order/sft/thd.h"

#include <string>
#include <utility>

namespace gridfeed::order::sft {
namespace {

BroadcastMessage Field(std::string name) {
  return {BroadcastMessage::Kind::kField, std::move(name)};
}
BroadcastMessage Numel(std::string name) {
  return {BroadcastMessage::Kind::kNumel, std::move(name)};
}

// index_select along dim 1 of a row-major [rows, width] field.
template <typename T>
std::vector<T> Gather(const std::vector<T>& values, int64_t width,
                      const std::vector<int32_t>& index) {
  if (values.empty()) return {};  // a field this stage does not hold stays None
  std::vector<T> out;
  const auto rows = static_cast<int64_t>(values.size()) / width;
  out.reserve(static_cast<size_t>(rows) * index.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (const int32_t i : index) out.push_back(values[static_cast<size_t>(r * width + i)]);
  }
  return out;
}

}  // namespace

std::vector<BroadcastMessage> SftBroadcastPlan(StageKind stage, int64_t cp) {
  std::vector<BroadcastMessage> plan;
  switch (stage) {
    case StageKind::kOnly:
      plan = {Field("tokens"), Field("labels"), Field("loss_mask"), Field("position_ids")};
      break;
    case StageKind::kFirst:
      plan = {Field("tokens"), Field("position_ids")};
      break;
    case StageKind::kLast:
      plan = {Field("labels"), Field("loss_mask")};
      break;
    case StageKind::kMiddle:
      break;
  }
  plan.push_back(Numel("cu_seqlens"));
  plan.push_back(Field("cu_seqlens"));
  plan.push_back(Field("max_seqlen"));
  // SFT never has cu_seqlens_padded: with CP only its "0" header goes out, no payload.
  if (cp > 1) plan.push_back(Numel("cu_seqlens_padded"));
  return plan;
}

PackedMicroBatch FlattenPacked(const PackedMicroBatch& batch) {
  PackedMicroBatch out;
  const int64_t mbs = batch.mbs;
  const bool has_sequence = !batch.tokens.empty() || !batch.labels.empty() ||
                            !batch.loss_mask.empty() || !batch.position_ids.empty();
  // Megatron takes L from the first sequence tensor present, else from cu_seqlens[0][-1]
  // (intermediate pipeline stages hold no sequence tensors).
  int64_t length = batch.seq_length;
  if (!has_sequence && batch.cu_width > 0 && !batch.cu_seqlens.empty()) {
    length = batch.cu_seqlens[static_cast<size_t>(batch.cu_width - 1)];
  }
  out.mbs = 1;
  out.seq_length = mbs * length;
  out.tokens = batch.tokens;
  out.labels = batch.labels;
  out.loss_mask = batch.loss_mask;
  out.position_ids = batch.position_ids;

  if (batch.cu_width > 0) {
    for (int64_t i = 0; i < mbs; ++i) {
      const int32_t* row = batch.cu_seqlens.data() + i * batch.cu_width;
      int64_t end = batch.cu_width;  // kept whole when no entry equals L
      for (int64_t k = 0; k < batch.cu_width; ++k) {
        if (row[k] == length) {
          end = k + 1;
          break;
        }
      }
      const int64_t begin = i == 0 ? 0 : 1;
      const auto offset = static_cast<int32_t>(i * length);
      for (int64_t k = begin; k < end; ++k) out.cu_seqlens.push_back(row[k] + offset);
    }
    out.cu_width = static_cast<int64_t>(out.cu_seqlens.size());
  }
  if (!batch.max_seqlen.empty()) {
    int32_t max = batch.max_seqlen[0];
    for (const int32_t v : batch.max_seqlen) max = v > max ? v : max;
    out.max_seqlen = {max};
  }
  return out;
}

Result<PackedMicroBatch> SliceForCpRank(const PackedMicroBatch& flattened, int64_t cp,
                                        int64_t rank) {
  if (cp == 1) return flattened;
  if (flattened.cu_width < 2 ||
      static_cast<int64_t>(flattened.cu_seqlens.size()) < flattened.cu_width) {
    return InvalidArgument("SliceForCpRank: cu_seqlens missing or shorter than 2 entries");
  }
  // Megatron's total is the width of tokens: mbs*L once flattened (mbs == 1).
  const int64_t total = flattened.seq_length;
  GRIDFEED_ASSIGN_OR_RETURN(
      std::vector<int32_t> index,
      ThdPartitionedIndices(std::span<const int32_t>(flattened.cu_seqlens.data(),
                                                     static_cast<size_t>(flattened.cu_width)),
                            total, cp, rank));
  // index_select raises on an out-of-range index (cu_seqlens reaching past the tensor).
  for (const int32_t i : index) {
    if (i < 0 || i >= total) {
      return InvalidArgument("SliceForCpRank: index " + std::to_string(i) + " outside [0, " +
                             std::to_string(total) + ")");
    }
  }
  PackedMicroBatch out = flattened;
  out.seq_length = static_cast<int64_t>(index.size());
  out.tokens = Gather(flattened.tokens, total, index);
  out.labels = Gather(flattened.labels, total, index);
  out.loss_mask = Gather(flattened.loss_mask, total, index);
  out.position_ids = Gather(flattened.position_ids, total, index);
  return out;
}

}  // namespace gridfeed::order::sft
