#include "gridfeed/io/dtype.h"

#include <cstring>
#include <limits>
#include <string>

namespace gridfeed::io {
namespace {

template <typename T>
T LoadAt(const std::byte* base, size_t i) {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void StoreAt(std::byte* base, size_t i, T v) {
  std::memcpy(base + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
bool Fits(int64_t v) {
  return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         v <= static_cast<int64_t>(std::numeric_limits<T>::max());
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat32:
      return "float32";
    case DType::kUInt16:
      return "uint16";
  }
  return "unknown";
}

std::string_view DTypeDescr(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "|u1";
    case DType::kInt8:
      return "|i1";
    case DType::kInt16:
      return "<i2";
    case DType::kInt32:
      return "<i4";
    case DType::kInt64:
      return "<i8";
    case DType::kFloat64:
      return "<f8";
    case DType::kFloat32:
      return "<f4";
    case DType::kUInt16:
      return "<u2";
  }
  return "";
}

Result<DType> DTypeFromCode(uint8_t code) {
  if (code < 1 || code > 8) {
    return DataLoss("unknown dtype code: expected 1..8, got " + std::to_string(code));
  }
  return static_cast<DType>(code);
}

Result<DType> DTypeFromName(std::string_view name) {
  for (uint8_t c = 1; c <= 8; ++c) {
    if (DTypeName(static_cast<DType>(c)) == name) return static_cast<DType>(c);
  }
  return InvalidArgument("unknown dtype name '" + std::string(name) + "'");
}

DType DTypeForVocabSize(int64_t vocab_size) {
  return vocab_size < 65500 ? DType::kUInt16 : DType::kInt32;
}

bool DTypeHolds(DType dtype, int64_t v) {
  switch (dtype) {
    case DType::kUInt8:
      return Fits<uint8_t>(v);
    case DType::kInt8:
      return Fits<int8_t>(v);
    case DType::kInt16:
      return Fits<int16_t>(v);
    case DType::kUInt16:
      return Fits<uint16_t>(v);
    case DType::kInt32:
      return Fits<int32_t>(v);
    case DType::kInt64:
      return true;
    // Integers a float stores exactly.
    case DType::kFloat32:
      return v >= -(int64_t{1} << 24) && v <= (int64_t{1} << 24);
    case DType::kFloat64:
      return v >= -(int64_t{1} << 53) && v <= (int64_t{1} << 53);
  }
  return false;
}

int64_t LoadAsInt64(DType dtype, const std::byte* base, size_t i) {
  switch (dtype) {
    case DType::kUInt8:
      return LoadAt<uint8_t>(base, i);
    case DType::kInt8:
      return LoadAt<int8_t>(base, i);
    case DType::kInt16:
      return LoadAt<int16_t>(base, i);
    case DType::kUInt16:
      return LoadAt<uint16_t>(base, i);
    case DType::kInt32:
      return LoadAt<int32_t>(base, i);
    case DType::kInt64:
      return LoadAt<int64_t>(base, i);
    case DType::kFloat32: {
      float f = LoadAt<float>(base, i);
      return (f >= -9.2e18f && f <= 9.2e18f) ? static_cast<int64_t>(f) : 0;
    }
    case DType::kFloat64: {
      double d = LoadAt<double>(base, i);
      return (d >= -9.2e18 && d <= 9.2e18) ? static_cast<int64_t>(d) : 0;
    }
  }
  return 0;
}

void StoreFromInt64(DType dtype, std::byte* base, size_t i, int64_t v) {
  switch (dtype) {
    case DType::kUInt8:
      StoreAt<uint8_t>(base, i, static_cast<uint8_t>(v));
      break;
    case DType::kInt8:
      StoreAt<int8_t>(base, i, static_cast<int8_t>(v));
      break;
    case DType::kInt16:
      StoreAt<int16_t>(base, i, static_cast<int16_t>(v));
      break;
    case DType::kUInt16:
      StoreAt<uint16_t>(base, i, static_cast<uint16_t>(v));
      break;
    case DType::kInt32:
      StoreAt<int32_t>(base, i, static_cast<int32_t>(v));
      break;
    case DType::kInt64:
      StoreAt<int64_t>(base, i, v);
      break;
    case DType::kFloat32:
      StoreAt<float>(base, i, static_cast<float>(v));
      break;
    case DType::kFloat64:
      StoreAt<double>(base, i, static_cast<double>(v));
      break;
  }
}

}  // namespace gridfeed::io
