// The trainer side of packed (THD) SFT micro-batches, as Megatron's get_batch does it for
// `--sft` (design note on SFT, part C): which tensors TP rank 0 broadcasts at each pipeline
// stage and in what order (a variable-length cu_seqlens goes as its length first, then its
// values), the flattening of a [mbs, L] micro-batch into one [1, mbs*L] packed sequence, and
// Transformer Engine's THD context-parallel partition (every sequence cut into 2*cp chunks, CP
// rank r keeps chunks r and 2*cp-1-r; cp_thd.h, shared by every packed pipeline).
//
// Pure functions; thread safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/cp_thd.h"

namespace gridfeed::order::sft {

enum class StageKind { kOnly, kFirst, kMiddle, kLast };

// One message of the TP broadcast. A "numel" header is a 0-d int64 holding the element count
// of the variable-length field that follows (0 = None: no payload follows).
struct BroadcastMessage {
  enum class Kind { kField, kNumel } kind = Kind::kField;
  std::string field;  // tokens, labels, loss_mask, position_ids, cu_seqlens, max_seqlen,
                      // cu_seqlens_padded (for kNumel: the field it announces)
};
// The messages in order for a stage (pp = 1 is kOnly), CP size `cp`, SFT (cu_seqlens present,
// cu_seqlens_padded None, no attention mask, no hybrid CP, no MTP).
std::vector<BroadcastMessage> SftBroadcastPlan(StageKind stage, int64_t cp);

// A collated micro-batch: row-major [mbs, L] fields, cu_seqlens [mbs, L+1] (each row padded
// with L), max_seqlen [mbs]. Fields a stage does not hold are empty.
struct PackedMicroBatch {
  int64_t mbs = 0;
  int64_t seq_length = 0;
  std::vector<int64_t> tokens, labels, position_ids;
  std::vector<float> loss_mask;
  std::vector<int32_t> cu_seqlens;  // [mbs, cu_width]
  int64_t cu_width = 0;
  std::vector<int32_t> max_seqlen;  // [mbs]
};
// flatten_batch_for_packed_sequences: the sequence fields become [1, mbs*L] (same values);
// cu_seqlens becomes the rows merged (each row cut after its first entry equal to L, row i > 0
// without its leading 0 and offset by i*L), max_seqlen its maximum ([1]).
PackedMicroBatch FlattenPacked(const PackedMicroBatch& batch);

// get_batch_on_this_cp_rank for a flattened SFT batch: the sequence fields index_select'ed by
// ThdPartitionedIndices(cu_seqlens, 1*mbs*L, cp, rank); cu_seqlens and max_seqlen unchanged.
// cp == 1 returns the batch unchanged.
Result<PackedMicroBatch> SliceForCpRank(const PackedMicroBatch& flattened, int64_t cp,
                                        int64_t rank);

}  // namespace gridfeed::order::sft
