// The byte layout of one micro-batch as the TP broadcast carries it, derived from the
// pipeline's field schema (order/field_schema.h). Every rank of a TP group computes the same
// layout from the same options, so no schema travels with the data.
//
// Layout, each part 8-byte aligned: the bookkeeping header (sample_indices, source_ids,
// sample_positions: int64 per sample, present on every stage that receives data), then this
// stage's fixed-size fields in schema order (a variable-length field holds its entry count
// here, int64), then the values of the variable-length fields at their capacity. The TP
// broadcast sends the fixed part first and then each variable field's used values only: its
// length, then its values, as Megatron's get_batch sends cu_seqlens.
// A run whose mixture stages have their own seq_length sizes buffers for its longest (Feeder's
// payload_layout) and lays out each micro-batch at its own length (At).
// Thread safe (const after construction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gridfeed/order/field_schema.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/sample_fields.h"

namespace gridfeed::feed {

struct MicroBatch;

class PayloadLayout {
 public:
  // The bookkeeping header's fields.
  enum Header { kSampleIndices, kSourceIds, kSamplePositions, kHeaderCount };

  // Where one schema field lies.
  struct Slot {
    const order::FieldSpec* spec = nullptr;
    size_t offset = 0;           // its values
    size_t bytes = 0;            // room for them (a variable field's capacity)
    size_t per_sample = 0;       // per-sample stride of [B, ...] fields; 0 otherwise
    size_t count_offset = 0;     // a variable field's entry count (int64), in the fixed part
    int64_t capacity = 0;        // a variable field's most entries
    std::vector<int64_t> shape;  // its shape (a variable field's: its capacity)
  };

  PayloadLayout() = default;
  PayloadLayout(const order::FieldSchema& schema, int64_t mbs, int64_t seq_length, int64_t cp,
                bool first_stage, bool last_stage);
  // The same stage's layout for samples of `seq_length` tokens.
  PayloadLayout At(int64_t seq_length) const;

  // Copies one header value for sample k.
  void PutHeader(std::vector<std::byte>* payload, Header field, int64_t k, int64_t value) const {
    std::memcpy(payload->data() + header_offset[field] + static_cast<size_t>(k) * 8, &value, 8);
  }
  // The slot of field `name` on this stage; null when this stage lacks it.
  const Slot* Find(std::string_view name) const;
  // Where sample k's fields go in `payload` (null for fields this stage lacks), as
  // order::AssembleFields writes them; the CP size and rank are the caller's to set.
  // REQUIRES payload->size() == total_bytes, !packed.
  order::FieldTargets Targets(std::vector<std::byte>* payload, int64_t k) const;
  // Where a packed micro-batch goes (REQUIRES: packed); CP size and rank are the caller's.
  order::PackedTargets Packed(std::vector<std::byte>* payload) const;
  // The entry count of variable field `slot` in `payload`, bounded by its capacity (the count
  // may come off the wire).
  int64_t CountOf(const std::vector<std::byte>& payload, const Slot& slot) const;
  // Makes `payload` mb's: sets its stage flags, header vectors and fields (laid out at
  // mb->seq_length when set (At), else at this layout's). REQUIRES payload.size() >= the
  // layout's total_bytes.
  void Unpack(std::vector<std::byte> payload, MicroBatch* mb) const;

  order::FieldSchema schema;
  bool has_inputs = false, has_targets = false, packed = false;
  bool receives = false;  // this stage receives a field (its header is filled then)
  size_t header_offset[kHeaderCount] = {};
  std::vector<Slot> slots;  // this stage's fields, schema order
  size_t fixed_bytes = 0;   // header and fixed fields: the TP broadcast's first message
  size_t total_bytes = 0;
  int64_t mbs = 0;
  int64_t seq_length = 0, cp = 1;
  bool first_stage = false, last_stage = false;
};

}  // namespace gridfeed::feed
