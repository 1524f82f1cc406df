// What a sample is, as its pipeline declares it (Pipeline::schema()): each field's name, dtype,
// shape rule, the pipeline stages that receive it and how context parallelism slices it. The
// feeder derives the rest from it: the payload layout and TP broadcast (feed/payload.h), the
// micro-batch's fields (feed/feeder.h), the Python views and `run --dump`. A new pipeline with
// new fields declares a schema; nothing in feed/, python/ or apps/ names its fields.
// Pure data; thread safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace gridfeed::order {

enum class DType : uint8_t {
  kInt64,
  kInt32,
  kFloat32,
  kBool,  // one byte, 0 or 1: NumPy's bool in Python views; uint8 in `run --dump` files
};
size_t DTypeSize(DType dtype);
// NumPy's array-protocol descriptor: "<i8", "<i4", "<f4", "|b1".
const char* NumpyDescr(DType dtype);
// The descriptor `run --dump` writes: NumpyDescr's, but "|u1" for kBool (its files keep the
// dtype they had before fields were declared).
const char* DumpDescr(DType dtype);

// A field's extent on one rank, from the micro-batch size B, the seq length S and the CP size c
// (L = S / c).
enum class FieldShape : uint8_t {
  kSequence,   // [B, L]: one row per sample
  kPackedRow,  // [1, B * L]: the micro-batch's samples laid end to end (packed sequences)
  kMaskRows,   // [B, 1, L, S]: this CP rank's query rows, every key column
  kVariable,   // [n], 0 <= n <= B * S + 1 per micro-batch: broadcast as its length, then values
  kScalar,     // [1] per micro-batch
};

// Which pipeline stages receive a field, as Megatron's get_batch hands them out.
enum StageMask : uint8_t {
  kFirstStage = 1,    // inputs
  kLastStage = 2,     // targets
  kMiddleStages = 4,  // neither first nor last (what their attention needs: cu_seqlens)
  kFirstAndLastStages = 3,
  kAllStages = 7,
};

// What CP rank r of c holds of a field.
enum class CpSlicing : uint8_t {
  kNone,    // the whole field, the same on every CP rank
  kZigzag,  // per sample: chunks r and 2c - 1 - r of 2c (cp_zigzag.h)
  kThd,     // per packed sequence: the same cut, sequence by sequence (cp_thd.h)
};

struct FieldSpec {
  const char* name;  // the get_batch key
  DType dtype;
  FieldShape shape;
  uint8_t stages;  // StageMask bits
  CpSlicing cp;
  bool on(bool first_stage, bool last_stage) const {
    return ((stages & kFirstStage) && first_stage) || ((stages & kLastStage) && last_stage) ||
           ((stages & kMiddleStages) && !first_stage && !last_stage);
  }
};

// A pipeline's fields in the order of the payload, the micro-batch, the Python views and
// `run --dump`. The specs have static storage duration: micro-batches point at them past the
// feeder's life.
struct FieldSchema {
  std::span<const FieldSpec> fields;
  const FieldSpec* Find(std::string_view name) const;  // null when absent
  // Whether the sequence fields are packed rows (the micro-batch is assembled as a whole).
  bool packed() const;
  // Whether middle pipeline stages receive a field (then their TP rank 0 reads too).
  bool middle_stages() const;
};

// The names the shared assembly code (sample_fields.h, OrderView::ReadPacked) writes.
inline constexpr std::string_view kTokens = "tokens", kLabels = "labels", kLossMask = "loss_mask",
                                  kAttentionMask = "attention_mask", kPositionIds = "position_ids",
                                  kCuSeqlens = "cu_seqlens", kMaxSeqlen = "max_seqlen";

// Megatron's pretraining sample (OLMo's orders and mixtures hand out the same): tokens,
// position_ids, attention_mask (only with `attention_mask`: --create-attention-mask), labels,
// loss_mask; zigzag CP slices.
FieldSchema GptSchema(bool attention_mask);
// Megatron's --sft micro-batch: tokens, labels, loss_mask, position_ids as one packed row with
// THD CP slices, then cu_seqlens (merged, padded as Megatron pads it) and max_seqlen, which
// every stage receives (Megatron's middle stages read data for them under --sft).
FieldSchema PackedSchema();

}  // namespace gridfeed::order
