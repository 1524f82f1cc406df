// Token dtypes of Megatron's .bin/.idx format (the dtype code byte of the .idx header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gridfeed/core/status.h"

namespace gridfeed::io {

enum class DType : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUInt16 = 8,
};

// Size of one token in bytes.
size_t DTypeSize(DType dtype);
// numpy's name ("uint16", "int32", ...).
std::string_view DTypeName(DType dtype);
// The numpy descr of the dtype ("<u2", "<i4", ...).
std::string_view DTypeDescr(DType dtype);
// Validates a code byte read from a file.
Result<DType> DTypeFromCode(uint8_t code);
Result<DType> DTypeFromName(std::string_view name);
// Megatron's preprocessing choice: uint16 when the vocabulary has fewer than 65500 entries,
// int32 otherwise (the threshold is 65500, not 65536).
DType DTypeForVocabSize(int64_t vocab_size);
// Whether `value` can be stored in `dtype` without change.
bool DTypeHolds(DType dtype, int64_t value);
// Reads element `i` of a little-endian array of `dtype` as int64 (floats are truncated).
int64_t LoadAsInt64(DType dtype, const std::byte* base, size_t i);
// Stores `value` as element `i` (caller checked DTypeHolds).
void StoreFromInt64(DType dtype, std::byte* base, size_t i, int64_t value);

}  // namespace gridfeed::io
