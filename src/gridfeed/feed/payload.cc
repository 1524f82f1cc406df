#include "gridfeed/feed/payload.h"

#include <xxhash.h>

#include <algorithm>

#include "gridfeed/feed/feeder.h"

namespace gridfeed::feed {
namespace {

template <typename T>
void CopyOut(const std::vector<std::byte>& payload, size_t offset, size_t bytes,
             std::vector<T>* out) {
  out->resize(bytes / sizeof(T));
  if (bytes) std::memcpy(out->data(), payload.data() + offset, bytes);
}

}  // namespace

PayloadLayout::PayloadLayout(int64_t mbs_in, int64_t seq_length_in, int64_t cp_in, bool first_stage,
                             bool last_stage, bool attention_mask, bool packed_in)
    : has_inputs(first_stage),
      has_targets(last_stage),
      has_mask(first_stage && attention_mask),
      packed(packed_in && (first_stage || last_stage)),
      mbs(mbs_in),
      seq_length(seq_length_in),
      cp(cp_in) {
  const size_t local = static_cast<size_t>(seq_length / cp_in);
  per_sample[kSampleIndices] = (has_inputs || has_targets) ? 8 : 0;
  per_sample[kSourceIds] = per_sample[kSampleIndices];
  per_sample[kSamplePositions] = per_sample[kSampleIndices];
  per_sample[kTokens] = has_inputs ? 8 * local : 0;
  per_sample[kPositionIds] = has_inputs ? 8 * local : 0;
  per_sample[kLabels] = has_targets ? 8 * local : 0;
  per_sample[kLossMask] = has_targets ? 4 * local : 0;
  per_sample[kAttentionMask] = has_mask ? local * static_cast<size_t>(seq_length) : 0;
  if (packed) {
    const size_t entries = static_cast<size_t>(mbs * seq_length + 1);
    per_batch[kNumCuSeqlens] = 8;
    per_batch[kCuSeqlens] = (4 * entries + 7) / 8 * 8;  // keeps what follows 8-byte aligned
    per_batch[kMaxSeqlen] = 8;
  }
  for (int f = 0; f < kCount; ++f) {
    offset[f] = total_bytes;
    total_bytes += per_sample[f] * static_cast<size_t>(mbs) + per_batch[f];
  }
}

PayloadLayout PayloadLayout::At(int64_t length) const {
  return PayloadLayout(mbs, length, cp, has_inputs, has_targets, has_mask, packed);
}

order::PackedTargets PayloadLayout::Packed(std::vector<std::byte>* payload) const {
  auto at = [&](Field f) -> void* {
    if (per_sample[f] == 0 && per_batch[f] == 0) return nullptr;
    return payload->data() + offset[f];
  };
  order::PackedTargets t;
  t.tokens = static_cast<int64_t*>(at(kTokens));
  t.position_ids = static_cast<int64_t*>(at(kPositionIds));
  t.labels = static_cast<int64_t*>(at(kLabels));
  t.loss_mask = static_cast<float*>(at(kLossMask));
  t.num_cu_seqlens = static_cast<int64_t*>(at(kNumCuSeqlens));
  t.cu_seqlens = static_cast<int32_t*>(at(kCuSeqlens));
  t.cu_capacity = mbs * seq_length + 1;
  t.max_seqlen = static_cast<int32_t*>(at(kMaxSeqlen));
  return t;
}

order::FieldTargets PayloadLayout::Targets(std::vector<std::byte>* payload, int64_t k) const {
  // Every field starts 8-byte aligned: the int64 fields come first and each is a whole number
  // of int64 (see the constructor), and vector storage is aligned for any scalar.
  auto at = [&](Field f) -> void* {
    if (per_sample[f] == 0) return nullptr;
    return payload->data() + offset[f] + static_cast<size_t>(k) * per_sample[f];
  };
  order::FieldTargets t;
  t.tokens = static_cast<int64_t*>(at(kTokens));
  t.position_ids = static_cast<int64_t*>(at(kPositionIds));
  t.labels = static_cast<int64_t*>(at(kLabels));
  t.loss_mask = static_cast<float*>(at(kLossMask));
  t.attention_mask = static_cast<uint8_t*>(at(kAttentionMask));
  return t;
}

void PayloadLayout::Unpack(const std::vector<std::byte>& p, MicroBatch* mb) const {
  if (mb->seq_length > 0 && mb->seq_length != seq_length) return At(mb->seq_length).Unpack(p, mb);
  mb->has_inputs = has_inputs;
  mb->has_targets = has_targets;
  const size_t n = static_cast<size_t>(mbs);
  CopyOut(p, offset[kSampleIndices], per_sample[kSampleIndices] * n, &mb->sample_indices);
  CopyOut(p, offset[kSourceIds], per_sample[kSourceIds] * n, &mb->source_ids);
  CopyOut(p, offset[kSamplePositions], per_sample[kSamplePositions] * n, &mb->sample_positions);
  CopyOut(p, offset[kTokens], per_sample[kTokens] * n, &mb->tokens);
  CopyOut(p, offset[kPositionIds], per_sample[kPositionIds] * n, &mb->position_ids);
  CopyOut(p, offset[kLabels], per_sample[kLabels] * n, &mb->labels);
  CopyOut(p, offset[kLossMask], per_sample[kLossMask] * n, &mb->loss_mask);
  CopyOut(p, offset[kAttentionMask], per_sample[kAttentionMask] * n, &mb->attention_mask);
  mb->packed = packed;
  if (packed) {
    int64_t count = 0;
    std::memcpy(&count, p.data() + offset[kNumCuSeqlens], 8);
    // The count comes off the wire: bounded by the field's room before it sizes anything.
    count = std::clamp<int64_t>(count, 0, mbs * seq_length + 1);
    CopyOut(p, offset[kCuSeqlens], static_cast<size_t>(count) * 4, &mb->cu_seqlens);
    std::memcpy(&mb->max_seqlen, p.data() + offset[kMaxSeqlen], 4);
  }
}

uint64_t MicroBatch::Digest() const {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  auto add = [&](const auto& v) { XXH3_64bits_update(st, v.data(), v.size() * sizeof(v[0])); };
  add(sample_indices);
  add(source_ids);
  add(sample_positions);
  add(tokens);
  add(position_ids);
  add(labels);
  add(loss_mask);
  add(attention_mask);
  add(cu_seqlens);
  XXH3_64bits_update(st, &max_seqlen, sizeof(max_seqlen));
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

}  // namespace gridfeed::feed
