#include "gridfeed/io/npy.h"

#include <regex>

#include "gridfeed/core/parse.h"
#include "gridfeed/io/publish_all.h"

namespace gridfeed::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

template <typename T>
void Widen(const std::vector<std::byte>& data, std::vector<int64_t>& out) {
  const size_t n = data.size() / sizeof(T);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int64_t>(v);
  }
}

}  // namespace

size_t NpyItemSize(const std::string& d) {
  if (d == "|u1" || d == "|i1" || d == "|b1") return 1;
  if (d == "<i2" || d == "<u2") return 2;
  if (d == "<i4" || d == "<u4" || d == "<f4") return 4;
  if (d == "<i8" || d == "<u8" || d == "<f8") return 8;
  return 0;
}

int64_t NpyArray::num_elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> NpyArray::ToInt64() const {
  std::vector<int64_t> out;
  if (descr == "|u1" || descr == "|b1")
    Widen<uint8_t>(data, out);
  else if (descr == "|i1")
    Widen<int8_t>(data, out);
  else if (descr == "<i2")
    Widen<int16_t>(data, out);
  else if (descr == "<u2")
    Widen<uint16_t>(data, out);
  else if (descr == "<i4")
    Widen<int32_t>(data, out);
  else if (descr == "<u4")
    Widen<uint32_t>(data, out);
  else if (descr == "<i8")
    Widen<int64_t>(data, out);
  else if (descr == "<u8")
    Widen<uint64_t>(data, out);
  else if (descr == "<f4")
    Widen<float>(data, out);
  else if (descr == "<f8")
    Widen<double>(data, out);
  return out;
}

Result<NpyArray> ParseNpy(std::span<const std::byte> bytes, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return DataLoss("corrupt npy file '" + path + "': " + what);
  };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) return bad("bad magic");
  const auto major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0;
  size_t offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    uint32_t l;
    std::memcpy(&l, bytes.data() + 8, 4);
    header_len = l;
    offset = 12;
  } else {
    return bad("unsupported format version " + std::to_string(major));
  }
  if (bytes.size() < offset + header_len) return bad("truncated header");
  std::string header(reinterpret_cast<const char*>(bytes.data() + offset), header_len);
  std::smatch m;
  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex order_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  NpyArray arr;
  if (!std::regex_search(header, m, descr_re)) return bad("no descr in header");
  arr.descr = m[1];
  if (!std::regex_search(header, m, order_re)) return bad("no fortran_order in header");
  if (m[1] == "True") return bad("fortran_order arrays are not supported");
  if (!std::regex_search(header, m, shape_re)) return bad("no shape in header");
  std::string dims = m[1];
  static const std::regex num_re(R"(\d+)");
  const size_t item = NpyItemSize(arr.descr);
  if (item == 0) return bad("unsupported descr '" + arr.descr + "'");
  const size_t have = bytes.size() - offset - header_len;
  // Each dimension and their product are bounded by the data present (no overflow).
  size_t elements = 1;
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num_re);
       it != std::sregex_iterator(); ++it) {
    const auto d = ParseInt64(it->str());
    if (!d || (*d > 0 && elements > have / item / static_cast<size_t>(*d))) {
      return bad("shape (" + dims + ") does not fit the file's " + std::to_string(have) +
                 " data bytes");
    }
    arr.shape.push_back(*d);
    elements *= static_cast<size_t>(*d);
  }
  const size_t want = elements * item;
  if (have != want) {
    return bad("data has " + std::to_string(have) + " bytes, shape needs " + std::to_string(want));
  }
  arr.data.assign(bytes.begin() + static_cast<ptrdiff_t>(offset + header_len), bytes.end());
  return arr;
}

Result<NpyArray> ReadNpy(const std::string& path) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  return ParseNpy(std::as_bytes(std::span(contents.data(), contents.size())), path);
}

Result<TempFile> WriteNpyTemp(const std::string& path, const std::string& descr,
                              const std::vector<int64_t>& shape, const void* data,
                              size_t size_bytes, const std::function<void(size_t bytes)>& written) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dims += ",";
    if (i + 1 < shape.size()) dims += " ";
  }
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // numpy pads the header with spaces so data starts on a 64-byte boundary, ending in '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(out)),
                                              {static_cast<const std::byte*>(data), size_bytes}};
  return WriteTemp(path, parts, written);
}

Status WriteNpy(const std::string& path, const std::string& descr,
                const std::vector<int64_t>& shape, const void* data, size_t size_bytes) {
  GRIDFEED_ASSIGN_OR_RETURN(TempFile f, WriteNpyTemp(path, descr, shape, data, size_bytes));
  return f.Publish();
}

}  // namespace gridfeed::io
