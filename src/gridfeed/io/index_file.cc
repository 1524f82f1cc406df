#include "gridfeed/io/index_file.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gridfeed/io/thread_scratch.h"

namespace gridfeed::io {
namespace {

template <typename T>
T LoadLe(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Status Corrupt(const std::string& path, const std::string& field, const std::string& expected,
               const std::string& actual) {
  return DataLoss("corrupt index file '" + path + "': field " + field + ": expected " + expected +
                  ", got " + actual);
}

}  // namespace

Result<IndexView> ParseIndex(std::span<const std::byte> bytes, const std::string& path,
                             bool multimodal, IndexCheck check, const CheckedFn& checked,
                             const MappedFileReader* reader, const InOrderFn& in_order) {
  const size_t n = bytes.size();
  if (n < kIndexHeaderBytes) {
    return Corrupt(path, "header", "at least " + std::to_string(kIndexHeaderBytes) + " bytes",
                   std::to_string(n) + " bytes (truncated)");
  }
  const std::byte* p = bytes.data();
  if (std::memcmp(p, kIndexMagic, sizeof(kIndexMagic)) != 0) {
    std::string got;
    for (size_t i = 0; i < sizeof(kIndexMagic); ++i) {
      char c = static_cast<char>(p[i]);
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", static_cast<unsigned>(static_cast<uint8_t>(c)));
      got += (c >= 32 && c < 127) ? std::string(1, c) : std::string(hex);
    }
    return Corrupt(path, "magic", "'MMIDIDX\\x00\\x00'", "'" + got + "'");
  }
  const uint64_t version = LoadLe<uint64_t>(p + kIndexVersionOffset);
  if (version != kIndexVersion) {
    return Corrupt(path, "version", "1", std::to_string(version) + " (unsupported version)");
  }
  IndexView view;
  const uint8_t code = LoadLe<uint8_t>(p + kIndexDtypeOffset);
  auto dtype = DTypeFromCode(code);
  if (!dtype.ok()) return Corrupt(path, "dtype", "a code in 1..8", std::to_string(code));
  view.dtype = *dtype;
  const uint64_t s = LoadLe<uint64_t>(p + kIndexSequencesOffset);
  const uint64_t d = LoadLe<uint64_t>(p + kIndexDocumentsOffset);

  // Bytes per sequence: 4 (length) + 8 (pointer) [+ 1 (mode)]; per document entry: 8.
  const uint64_t per_seq = multimodal ? 13 : 12;
  const uint64_t body = n - kIndexHeaderBytes;
  if (s > body / per_seq || d > (body - s * per_seq) / 8) {
    return Corrupt(path, "sequence_count/document_count",
                   "counts that fit in " + std::to_string(n) + " bytes",
                   "sequence_count=" + std::to_string(s) + " document_count=" + std::to_string(d) +
                       " (needs more bytes than the file has)");
  }
  const uint64_t expected_size = kIndexHeaderBytes + s * per_seq + d * 8;
  if (n != expected_size) {
    // A multimodal file opened as plain has exactly S trailing mode bytes; accept it.
    if (!(!multimodal && n == expected_size + s)) {
      return Corrupt(path, "file size", std::to_string(expected_size) + " bytes",
                     std::to_string(n) + " bytes (trailing data)");
    }
  }
  const std::byte* at = p + kIndexHeaderBytes;
  view.sequence_lengths = LeSpan<int32_t>(at, s);
  at += s * 4;
  view.sequence_pointers = LeSpan<int64_t>(at, s);
  at += s * 8;
  view.document_indices = LeSpan<int64_t>(at, d);
  at += d * 8;
  if (multimodal) view.sequence_modes = LeSpan<int8_t>(at, s);

  const uint64_t item = DTypeSize(view.dtype);
  if (check == IndexCheck::kStructure) {
    const int64_t last_ptr = s ? view.sequence_pointers[s - 1] : 0;
    const int32_t last_len = s ? view.sequence_lengths[s - 1] : 0;
    if (last_ptr < 0 || last_len < 0) {
      return Corrupt(path, "last sequence", "a pointer and a length >= 0",
                     std::to_string(last_ptr) + ", " + std::to_string(last_len));
    }
    view.bin_bytes_needed =
        static_cast<uint64_t>(last_ptr) + static_cast<uint64_t>(last_len) * item;
    view.total_tokens = view.bin_bytes_needed / item;  // pointers are the running sums
    if (d == 0) return Corrupt(path, "document_indices", "at least one entry (0)", "no entries");
    return view;
  }
  // Each part is read through `reader` into buffers where it can be (little-endian hosts):
  // 64 Ki entries, so the buffers stay in cache and cost few page faults; else through the
  // mapping, 16 MB of pointers or of document indices at a time handed to `checked`.
  const bool buffered =
      reader != nullptr && reader->ok() && std::endian::native == std::endian::little;
  const uint64_t kPart = buffered ? uint64_t{1} << 16 : uint64_t{1} << 21;
  auto done = [&](const std::byte* from, uint64_t bytes) {
    if (checked) checked(std::span<const std::byte>(from, bytes));
  };
  const std::span<int32_t> len_buf =
      ThreadScratchOf<int32_t>(ScratchSlot::kIndexLengths, buffered ? std::min(s, kPart) : 0);
  const std::span<int64_t> ptr_buf = ThreadScratchOf<int64_t>(
      ScratchSlot::kIndexPointers,
      buffered ? std::min(std::max(s, d), kPart + 1) : 0);  // + 1: documents
  const auto file_offset = [p](const std::byte* at) { return static_cast<uint64_t>(at - p); };
  auto read = [&](auto& buf, const std::byte* from, uint64_t count) {
    return buffered && count <= buf.size() &&
           reader->ReadAt(file_offset(from), std::as_writable_bytes(std::span(
                                                 buf.data(), static_cast<size_t>(count))));
  };
  // The in-order feed: bytes [0, fed) of the file went to `in_order`. feed_to reads the next
  // ones itself (through `reader`, else the mapping); feed_part hands over what the check read.
  uint64_t fed = 0;
  // Page aligned, as the offsets of its first and largest reads (the header and lengths) are,
  // so ReadAt copies straight into it (see MappedFileReader::ReadAt).
  std::span<std::byte> feed_buf;
  auto feed_to = [&](uint64_t to) {
    if (!in_order) return;
    constexpr uint64_t kFeed = uint64_t{1} << 20;
    while (fed < to) {
      const size_t k = static_cast<size_t>(std::min(kFeed, to - fed));
      if (feed_buf.size() < k) feed_buf = ThreadScratch(ScratchSlot::kIndexFeed, kFeed);
      const std::span<std::byte> part(feed_buf.data(), k);
      if (buffered && reader->ReadAt(fed, part)) {
        in_order(part);
      } else {
        in_order(bytes.subspan(static_cast<size_t>(fed), k));
      }
      fed += k;
    }
  };
  auto feed_part = [&](uint64_t offset, std::span<const std::byte> part) {
    if (!in_order) return;
    feed_to(offset);
    const uint64_t end = offset + part.size();
    if (end <= fed) return;
    in_order(part.subspan(static_cast<size_t>(fed - offset)));
    fed = end;
  };
  feed_to(file_offset(view.sequence_pointers.bytes().data()));  // the header and the lengths
  uint64_t pointer = 0;
  uint64_t tokens = 0;
  // The checks of sequences [lo, hi), whatever holds them.
  auto check_sequences = [&](uint64_t lo, uint64_t hi, auto len_at, auto ptr_at) -> Status {
    for (uint64_t i = lo; i < hi; ++i) {
      const int32_t len = len_at(i);
      if (len < 0) {
        return Corrupt(path, "sequence_lengths[" + std::to_string(i) + "]", "a value >= 0",
                       std::to_string(len));
      }
      const int64_t ptr = ptr_at(i);
      if (ptr < 0 || static_cast<uint64_t>(ptr) != pointer) {
        return Corrupt(path, "sequence_pointers[" + std::to_string(i) + "]",
                       std::to_string(pointer) + " (running sum of lengths x " +
                           std::to_string(item) + " bytes)",
                       std::to_string(ptr));
      }
      pointer += static_cast<uint64_t>(len) * item;
      tokens += static_cast<uint64_t>(len);
    }
    return Status::Ok();
  };
  for (uint64_t lo = 0; lo < s; lo += kPart) {
    const uint64_t hi = std::min(s, lo + kPart);
    const std::byte* lens = view.sequence_lengths.bytes().data() + lo * 4;
    const std::byte* ptrs = view.sequence_pointers.bytes().data() + lo * 8;
    if (read(len_buf, lens, hi - lo) && read(ptr_buf, ptrs, hi - lo)) {
      GRIDFEED_RETURN_IF_ERROR(check_sequences(
          lo, hi, [&](uint64_t i) { return len_buf[i - lo]; },
          [&](uint64_t i) { return ptr_buf[i - lo]; }));
      feed_part(file_offset(ptrs), std::as_bytes(std::span(ptr_buf).first(hi - lo)));
    } else {
      GRIDFEED_RETURN_IF_ERROR(check_sequences(
          lo, hi, [&](uint64_t i) { return view.sequence_lengths[i]; },
          [&](uint64_t i) { return view.sequence_pointers[i]; }));
      feed_part(file_offset(ptrs), std::span(ptrs, (hi - lo) * 8));
      done(ptrs, (hi - lo) * 8);
    }
  }
  view.total_tokens = tokens;
  view.bin_bytes_needed = pointer;

  if (d == 0) return Corrupt(path, "document_indices", "at least one entry (0)", "no entries");
  if (view.document_indices[0] != 0) {
    return Corrupt(path, "document_indices[0]", "0", std::to_string(view.document_indices[0]));
  }
  // Entry i against entry i - 1, for i in [lo, hi); `doc_at(i)` for i in [lo - 1, hi).
  auto check_documents = [&](uint64_t lo, uint64_t hi, auto doc_at) -> Status {
    for (uint64_t i = lo; i < hi; ++i) {
      if (doc_at(i) < doc_at(i - 1)) {
        return Corrupt(path, "document_indices[" + std::to_string(i) + "]",
                       "a value >= " + std::to_string(doc_at(i - 1)) + " (non-decreasing)",
                       std::to_string(doc_at(i)));
      }
    }
    return Status::Ok();
  };
  for (uint64_t lo = 1; lo < d; lo += kPart) {
    const uint64_t hi = std::min(d, lo + kPart);
    const std::byte* docs = view.document_indices.bytes().data() + (lo - 1) * 8;
    if (read(ptr_buf, docs, hi - lo + 1)) {
      GRIDFEED_RETURN_IF_ERROR(
          check_documents(lo, hi, [&](uint64_t i) { return ptr_buf[i - (lo - 1)]; }));
      feed_part(file_offset(docs), std::as_bytes(std::span(ptr_buf).first(hi - lo + 1)));
    } else {
      GRIDFEED_RETURN_IF_ERROR(
          check_documents(lo, hi, [&](uint64_t i) { return view.document_indices[i]; }));
      feed_part(file_offset(docs), std::span(docs, (hi - lo + 1) * 8));
      done(docs, (hi - lo) * 8);
    }
  }
  if (view.document_indices[d - 1] != static_cast<int64_t>(s)) {
    return Corrupt(path, "document_indices[" + std::to_string(d - 1) + "]",
                   std::to_string(s) + " (the sequence count)",
                   std::to_string(view.document_indices[d - 1]));
  }
  feed_to(n);  // the modes, or a plain reading's trailing mode bytes
  return view;
}

}  // namespace gridfeed::io
