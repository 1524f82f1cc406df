#include "gridfeed/order/field_schema.h"

namespace gridfeed::order {
namespace {

constexpr FieldSpec kGptWithMask[] = {
    {"tokens", DType::kInt64, FieldShape::kSequence, kFirstStage, CpSlicing::kZigzag},
    {"position_ids", DType::kInt64, FieldShape::kSequence, kFirstStage, CpSlicing::kZigzag},
    {"attention_mask", DType::kBool, FieldShape::kMaskRows, kFirstStage, CpSlicing::kZigzag},
    {"labels", DType::kInt64, FieldShape::kSequence, kLastStage, CpSlicing::kZigzag},
    {"loss_mask", DType::kFloat32, FieldShape::kSequence, kLastStage, CpSlicing::kZigzag},
};
constexpr FieldSpec kGpt[] = {kGptWithMask[0], kGptWithMask[1], kGptWithMask[3], kGptWithMask[4]};
constexpr FieldSpec kPacked[] = {
    {"tokens", DType::kInt64, FieldShape::kPackedRow, kFirstStage, CpSlicing::kThd},
    {"position_ids", DType::kInt64, FieldShape::kPackedRow, kFirstStage, CpSlicing::kThd},
    {"labels", DType::kInt64, FieldShape::kPackedRow, kLastStage, CpSlicing::kThd},
    {"loss_mask", DType::kFloat32, FieldShape::kPackedRow, kLastStage, CpSlicing::kThd},
    {"cu_seqlens", DType::kInt32, FieldShape::kVariable, kAllStages, CpSlicing::kNone},
    {"max_seqlen", DType::kInt32, FieldShape::kScalar, kAllStages, CpSlicing::kNone},
};

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kInt64:
      return 8;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kBool:
      return 1;
  }
  return 0;
}

const char* NumpyDescr(DType dtype) {
  switch (dtype) {
    case DType::kInt64:
      return "<i8";
    case DType::kInt32:
      return "<i4";
    case DType::kFloat32:
      return "<f4";
    case DType::kBool:
      return "|b1";
  }
  return "";
}

const char* DumpDescr(DType dtype) { return dtype == DType::kBool ? "|u1" : NumpyDescr(dtype); }

const FieldSpec* FieldSchema::Find(std::string_view name) const {
  for (const FieldSpec& f : fields) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

bool FieldSchema::packed() const {
  for (const FieldSpec& f : fields) {
    if (f.shape == FieldShape::kPackedRow) return true;
  }
  return false;
}

bool FieldSchema::middle_stages() const {
  for (const FieldSpec& f : fields) {
    if (f.stages & kMiddleStages) return true;
  }
  return false;
}

FieldSchema GptSchema(bool attention_mask) {
  if (attention_mask) return {kGptWithMask};
  return {kGpt};
}

FieldSchema PackedSchema() { return {kPacked}; }

}  // namespace gridfeed::order
