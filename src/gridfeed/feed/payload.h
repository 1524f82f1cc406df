// The byte layout of one micro-batch as the TP broadcast carries it. Every rank of a TP group
// computes the same layout from the same options, so no schema travels with the data.
// Order: sample_indices, source_ids, sample_positions, tokens, position_ids, labels (int64),
// loss_mask (float32), attention_mask (uint8); a stage carries only its fields (first: inputs,
// last: targets; sample_indices, source_ids and sample_positions go to both). A run whose
// mixture stages have their own seq_length sizes buffers for its longest (Feeder's
// payload_layout) and lays out each micro-batch at its own length (At).
// A packed order (SFT) carries the sequence fields flattened (one row of mbs x S / cp, THD CP
// slices) and, on both stages, three per-micro-batch fields after them: the entry count of the
// merged cu_seqlens (int64; Megatron's "numel" message), cu_seqlens itself (int32, room for
// mbs x S + 1 entries, padded to 8 bytes) and max_seqlen (int32 in 8 bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/sample_fields.h"

namespace gridfeed::feed {

struct MicroBatch;

class PayloadLayout {
 public:
  enum Field {
    kSampleIndices,
    kSourceIds,
    kSamplePositions,
    kTokens,
    kPositionIds,
    kLabels,
    kLossMask,
    kAttentionMask,
    kNumCuSeqlens,
    kCuSeqlens,
    kMaxSeqlen,
    kCount
  };

  PayloadLayout() = default;
  PayloadLayout(int64_t mbs, int64_t seq_length, int64_t cp, bool first_stage, bool last_stage,
                bool attention_mask, bool packed = false);
  // The same stage's layout for samples of `seq_length` tokens.
  PayloadLayout At(int64_t seq_length) const;

  // Copies `count` elements for sample k of `field` into the payload.
  template <typename T>
  void Put(std::vector<std::byte>* payload, Field field, int64_t k, const T* data,
           size_t count) const {
    std::memcpy(payload->data() + offset[field] + static_cast<size_t>(k) * per_sample[field], data,
                count * sizeof(T));
  }
  // Where sample k's fields go in `payload` (null for fields this stage lacks), as
  // order::AssembleFields writes them; the CP size and rank are the caller's to set.
  // REQUIRES payload->size() == total_bytes.
  order::FieldTargets Targets(std::vector<std::byte>* payload, int64_t k) const;
  // Where a packed micro-batch goes (REQUIRES: packed); CP size and rank are the caller's.
  order::PackedTargets Packed(std::vector<std::byte>* payload) const;
  // Fills mb's fields; laid out at mb->seq_length when set (At), else at this layout's.
  void Unpack(const std::vector<std::byte>& payload, MicroBatch* mb) const;

  bool has_inputs = false, has_targets = false, has_mask = false, packed = false;
  size_t total_bytes = 0;
  size_t offset[kCount] = {};
  size_t per_sample[kCount] = {};  // bytes per sample, 0 when absent
  size_t per_batch[kCount] = {};   // bytes per micro-batch of the packed fields
  int64_t mbs = 0;
  int64_t seq_length = 0, cp = 1;
};

}  // namespace gridfeed::feed
