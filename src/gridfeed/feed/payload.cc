#include "gridfeed/feed/payload.h"

#include <xxhash.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "gridfeed/feed/feeder.h"

namespace gridfeed::feed {
namespace {

size_t Align8(size_t n) { return (n + 7) / 8 * 8; }

}  // namespace

PayloadLayout::PayloadLayout(const order::FieldSchema& schema_in, int64_t mbs_in,
                             int64_t seq_length_in, int64_t cp_in, bool first, bool last)
    : schema(schema_in),
      has_inputs(first),
      has_targets(last),
      mbs(mbs_in),
      seq_length(seq_length_in),
      cp(cp_in),
      first_stage(first),
      last_stage(last) {
  const int64_t local = seq_length / cp;
  const auto b = static_cast<size_t>(mbs);
  receives = false;
  for (const order::FieldSpec& f : schema.fields) receives = receives || f.on(first, last);
  for (int h = 0; h < kHeaderCount; ++h) {
    header_offset[h] = total_bytes;
    if (receives) total_bytes += 8 * b;
  }
  std::vector<Slot*> variable;
  for (const order::FieldSpec& f : schema.fields) {
    if (!f.on(first, last)) continue;
    Slot s;
    s.spec = &f;
    const size_t size = order::DTypeSize(f.dtype);
    switch (f.shape) {
      case order::FieldShape::kSequence:
        s.shape = {mbs, local};
        s.per_sample = size * static_cast<size_t>(local);
        break;
      case order::FieldShape::kPackedRow:
        s.shape = {1, mbs * local};
        break;
      case order::FieldShape::kMaskRows:
        s.shape = {mbs, 1, local, seq_length};
        s.per_sample = size * static_cast<size_t>(local * seq_length);
        break;
      case order::FieldShape::kVariable:
        s.capacity = mbs * seq_length + 1;
        s.shape = {s.capacity};
        break;
      case order::FieldShape::kScalar:
        s.shape = {1};
        break;
    }
    int64_t elements = 1;
    for (int64_t d : s.shape) elements *= d;
    s.bytes = size * static_cast<size_t>(elements);
    if (f.shape == order::FieldShape::kVariable) {
      s.count_offset = total_bytes;
      total_bytes += 8;
    } else {
      s.offset = total_bytes;
      total_bytes += Align8(s.bytes);
    }
    slots.push_back(std::move(s));
  }
  packed = schema.packed();  // the order's, also on a stage without the packed rows
  fixed_bytes = total_bytes;
  for (Slot& s : slots) {
    if (s.spec->shape != order::FieldShape::kVariable) continue;
    s.offset = total_bytes;
    total_bytes += Align8(s.bytes);
  }
}

PayloadLayout PayloadLayout::At(int64_t length) const {
  return PayloadLayout(schema, mbs, length, cp, first_stage, last_stage);
}

const PayloadLayout::Slot* PayloadLayout::Find(std::string_view name) const {
  for (const Slot& s : slots) {
    if (name == s.spec->name) return &s;
  }
  return nullptr;
}

int64_t PayloadLayout::CountOf(const std::vector<std::byte>& payload, const Slot& slot) const {
  int64_t count = 0;
  std::memcpy(&count, payload.data() + slot.count_offset, 8);
  return std::clamp<int64_t>(count, 0, slot.capacity);
}

// The adapters to the shared assembly code (sample_fields.h, OrderView::ReadPacked), which
// write the fields by these names; a schema without one of them leaves its pointer null.
order::PackedTargets PayloadLayout::Packed(std::vector<std::byte>* payload) const {
  auto at = [&](std::string_view name) -> void* {
    const Slot* s = Find(name);
    return s ? payload->data() + s->offset : nullptr;
  };
  order::PackedTargets t;
  t.tokens = static_cast<int64_t*>(at(order::kTokens));
  t.position_ids = static_cast<int64_t*>(at(order::kPositionIds));
  t.labels = static_cast<int64_t*>(at(order::kLabels));
  t.loss_mask = static_cast<float*>(at(order::kLossMask));
  if (const Slot* cu = Find(order::kCuSeqlens)) {
    t.cu_seqlens = reinterpret_cast<int32_t*>(payload->data() + cu->offset);
    t.num_cu_seqlens = reinterpret_cast<int64_t*>(payload->data() + cu->count_offset);
    t.cu_capacity = cu->capacity;
  }
  t.max_seqlen = static_cast<int32_t*>(at(order::kMaxSeqlen));
  return t;
}

order::FieldTargets PayloadLayout::Targets(std::vector<std::byte>* payload, int64_t k) const {
  // Every slot starts 8-byte aligned, and vector storage is aligned for any scalar.
  auto at = [&](std::string_view name) -> void* {
    const Slot* s = Find(name);
    if (s == nullptr) return nullptr;
    return payload->data() + s->offset + static_cast<size_t>(k) * s->per_sample;
  };
  order::FieldTargets t;
  t.tokens = static_cast<int64_t*>(at(order::kTokens));
  t.position_ids = static_cast<int64_t*>(at(order::kPositionIds));
  t.labels = static_cast<int64_t*>(at(order::kLabels));
  t.loss_mask = static_cast<float*>(at(order::kLossMask));
  t.attention_mask = static_cast<uint8_t*>(at(order::kAttentionMask));
  return t;
}

void PayloadLayout::Unpack(std::vector<std::byte> p, MicroBatch* mb) const {
  if (mb->seq_length > 0 && mb->seq_length != seq_length) {
    return At(mb->seq_length).Unpack(std::move(p), mb);
  }
  mb->has_inputs = has_inputs;
  mb->has_targets = has_targets;
  mb->packed = packed;
  const size_t n = receives ? static_cast<size_t>(mbs) : 0;
  auto header = [&](Header h, std::vector<int64_t>* out) {
    out->resize(n);
    if (n) std::memcpy(out->data(), p.data() + header_offset[h], 8 * n);
  };
  header(kSampleIndices, &mb->sample_indices);
  header(kSourceIds, &mb->source_ids);
  header(kSamplePositions, &mb->sample_positions);
  mb->fields.clear();
  for (const Slot& s : slots) {
    FieldArray f{s.spec, s.shape, s.offset, s.bytes};
    if (s.spec->shape == order::FieldShape::kVariable) {
      const int64_t count = CountOf(p, s);
      f.shape = {count};
      f.bytes = static_cast<size_t>(count) * order::DTypeSize(s.spec->dtype);
    }
    mb->fields.push_back(std::move(f));
  }
  mb->payload = std::move(p);
}

const FieldArray* MicroBatch::Find(std::string_view name) const {
  for (const FieldArray& f : fields) {
    if (name == f.spec->name) return &f;
  }
  return nullptr;
}

void MicroBatch::CheckDType(const FieldArray& f, size_t size, bool floating) {
  const bool is_floating = f.spec->dtype == order::DType::kFloat32;
  if (order::DTypeSize(f.spec->dtype) != size || is_floating != floating) {
    throw std::logic_error(std::string("MicroBatch field ") + f.spec->name + " is " +
                           order::NumpyDescr(f.spec->dtype) + ", read as another type");
  }
}

uint64_t MicroBatch::Digest() const {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  auto add = [&](const auto& v) { XXH3_64bits_update(st, v.data(), v.size() * sizeof(v[0])); };
  add(sample_indices);
  add(source_ids);
  add(sample_positions);
  for (const FieldArray& f : fields) {
    XXH3_64bits_update(st, f.spec->name, std::strlen(f.spec->name));
    XXH3_64bits_update(st, payload.data() + f.offset, f.bytes);
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

}  // namespace gridfeed::feed
