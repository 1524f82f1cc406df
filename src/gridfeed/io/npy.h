// .npy files, format version 1.0, C order, little endian (numpy's own format).
// Supported descrs: |u1 |i1 |b1 <i2 <u2 <i4 <u4 <i8 <u8 <f4 <f8.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/page_array.h"
#include "gridfeed/core/status.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::io {

template <typename T>
constexpr const char* NpyDescr();
template <>
constexpr const char* NpyDescr<uint8_t>() {
  return "|u1";
}
template <>
constexpr const char* NpyDescr<int8_t>() {
  return "|i1";
}
template <>
constexpr const char* NpyDescr<int16_t>() {
  return "<i2";
}
template <>
constexpr const char* NpyDescr<uint16_t>() {
  return "<u2";
}
template <>
constexpr const char* NpyDescr<int32_t>() {
  return "<i4";
}
template <>
constexpr const char* NpyDescr<uint32_t>() {
  return "<u4";
}
template <>
constexpr const char* NpyDescr<int64_t>() {
  return "<i8";
}
template <>
constexpr const char* NpyDescr<uint64_t>() {
  return "<u8";
}
template <>
constexpr const char* NpyDescr<float>() {
  return "<f4";
}
template <>
constexpr const char* NpyDescr<double>() {
  return "<f8";
}

// Bytes per element of a supported descr, 0 if unsupported.
size_t NpyItemSize(const std::string& descr);

struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  int64_t num_elements() const;
  template <typename T>
  bool Is() const {
    return descr == NpyDescr<T>();
  }
  // Copies the elements out; the caller checks Is<T>() first.
  template <typename T>
  std::vector<T> As() const {
    std::vector<T> out(data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
    return out;
  }
  // Widens any integer descr to int64 (for comparisons independent of dtype).
  std::vector<int64_t> ToInt64() const;
};

Result<NpyArray> ReadNpy(const std::string& path);
// Parses a whole .npy image held in memory; `path` is used in messages.
Result<NpyArray> ParseNpy(std::span<const std::byte> bytes, const std::string& path);

// Writes a .npy file atomically (a temporary, fsynced, renamed over `path`).
Status WriteNpy(const std::string& path, const std::string& descr,
                const std::vector<int64_t>& shape, const void* data, size_t size_bytes);
// The same file as an unpublished temporary (WriteTemp, whose `written` is told of the data's
// bytes), for PublishAll.
Result<TempFile> WriteNpyTemp(const std::string& path, const std::string& descr,
                              const std::vector<int64_t>& shape, const void* data,
                              size_t size_bytes,
                              const std::function<void(size_t bytes)>& written = {});

template <typename T>
Status WriteNpy(const std::string& path, std::span<const T> values,
                std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  return WriteNpy(path, NpyDescr<T>(), shape, values.data(), values.size_bytes());
}
template <typename T>
Status WriteNpy(const std::string& path, const std::vector<T>& values,
                std::vector<int64_t> shape = {}) {
  return WriteNpy(path, std::span<const T>(values), std::move(shape));
}
template <typename T>
Status WriteNpy(const std::string& path, const PageArray<T>& values,
                std::vector<int64_t> shape = {}) {
  return WriteNpy(path, std::span<const T>(values), std::move(shape));
}

}  // namespace gridfeed::io
