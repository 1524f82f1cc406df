#include "gridfeed/io/indexed_dataset.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "gridfeed/core/check.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/thread_scratch.h"

namespace gridfeed::io {

namespace {

template <typename T>
void Widen(const std::byte* data, int64_t n, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int64_t>(v);
  }
}

}  // namespace

void TokenSpan::CopyTo(int64_t* out) const {
  // One dtype dispatch per run, then a loop the compiler vectorises.
  switch (dtype) {
    case DType::kUInt16:
      return Widen<uint16_t>(data, length_tokens, out);
    case DType::kInt32:
      return Widen<int32_t>(data, length_tokens, out);
    case DType::kUInt8:
      return Widen<uint8_t>(data, length_tokens, out);
    case DType::kInt8:
      return Widen<int8_t>(data, length_tokens, out);
    case DType::kInt16:
      return Widen<int16_t>(data, length_tokens, out);
    case DType::kInt64:
      return Widen<int64_t>(data, length_tokens, out);
    case DType::kFloat32:
    case DType::kFloat64:
      for (int64_t i = 0; i < length_tokens; ++i) out[i] = (*this)[i];
      return;
  }
}

Result<IndexView> IndexedDataset::ParseFully(bool multimodal, bool digest) const {
  // The full check passes over the whole index once, through a descriptor where it can (the
  // mapping untouched), else through the mapping, dropping its pages behind it so a multi-GB
  // index is not all left resident (what the order needs is read again on demand).
  const MMapFile& idx = idx_;
  const MappedFileReader reader(idx);
  // The digest from the check's own reads (XXH3_64bits over the whole file, streamed).
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(
      digest ? XXH3_createState() : nullptr, &XXH3_freeState);
  InOrderFn in_order;
  if (state) {
    XXH3_64bits_reset(state.get());
    in_order = [s = state.get()](std::span<const std::byte> part) {
      XXH3_64bits_update(s, part.data(), part.size());
    };
  }
  GRIDFEED_ASSIGN_OR_RETURN(
      IndexView view,
      ParseIndex(
          idx.bytes(), prefix_ + ".idx", multimodal, IndexCheck::kFull,
          [&idx](std::span<const std::byte> part) { idx.DropPages(part); }, &reader, in_order));
  if (state) {
    std::call_once(digest_->once, [&] { digest_->value = XXH3_64bits_digest(state.get()); });
  }
  return view;
}

Result<IndexedDataset> IndexedDataset::Open(const std::string& prefix, bool multimodal,
                                            IndexCheck check, bool digest) {
  IndexedDataset ds;
  ds.prefix_ = prefix;
  ds.multimodal_ = multimodal;
  const std::string idx_path = prefix + ".idx";
  const std::string bin_path = prefix + ".bin";
  auto idx = MMapFile::Open(idx_path);
  if (!idx.ok()) {
    // A common slip: the .bin or .idx file named where the prefix belongs.
    for (const char* suffix : {".bin", ".idx"}) {
      if (prefix.size() > 4 && prefix.ends_with(suffix)) {
        return Status(idx.status().code(),
                      idx.status().message() + " (a data path is a prefix, without .bin or " +
                          ".idx: '" + prefix.substr(0, prefix.size() - 4) + "')");
      }
    }
    return idx.status();
  }
  ds.idx_ = std::move(idx).value();
  if (check == IndexCheck::kFull) {
    GRIDFEED_ASSIGN_OR_RETURN(ds.view_, ds.ParseFully(multimodal, digest));
  } else {  // a few bytes only
    GRIDFEED_ASSIGN_OR_RETURN(ds.view_, ParseIndex(ds.idx_.bytes(), idx_path, multimodal, check));
  }
  GRIDFEED_ASSIGN_OR_RETURN(ds.bin_, MMapFile::Open(bin_path));
  // Exactly as long as the index says (Megatron's writer makes it so): a longer .bin is not
  // this index's file (e.g. a writer killed between publishing the two), a shorter one is cut.
  if (ds.bin_.size() != ds.view_.bin_bytes_needed) {
    const bool cut = ds.bin_.size() < ds.view_.bin_bytes_needed;
    return DataLoss("corrupt token file '" + bin_path + "': field size: expected " +
                    std::to_string(ds.view_.bin_bytes_needed) +
                    " bytes (end of the last sequence in '" + idx_path + "'), got " +
                    std::to_string(ds.bin_.size()) + " bytes (" +
                    (cut ? "truncated" : "longer: not the file this index describes") + ")");
  }
  return ds;
}

Status IndexedDataset::CheckIndexFully(bool digest) const {
  GRIDFEED_ASSIGN_OR_RETURN(IndexView full, ParseFully(multimodal_, digest));
  // The pointers' running sum ends where the last sequence does (the full check proved it),
  // which the open checked the .bin to hold; a file changed since the open may differ.
  if (full.bin_bytes_needed != view_.bin_bytes_needed ||
      full.sequence_lengths.size() != view_.sequence_lengths.size()) {
    return DataLoss("index file '" + prefix_ + ".idx' changed while it was read (its full " +
                    "check found other counts than its open)");
  }
  return Status::Ok();
}

Result<TokenSpan> IndexedDataset::Get(int64_t sequence, int64_t offset_tokens,
                                      int64_t length_tokens) const {
  if (sequence < 0 || sequence >= num_sequences()) {
    return OutOfRange("'" + prefix_ + "': sequence " + std::to_string(sequence) +
                      " out of range [0, " + std::to_string(num_sequences()) + ")");
  }
  const int64_t len = view_.sequence_lengths[static_cast<size_t>(sequence)];
  if (length_tokens < 0) length_tokens = len - offset_tokens;
  if (offset_tokens < 0 || length_tokens < 0 || offset_tokens > len ||
      length_tokens > len - offset_tokens) {
    return OutOfRange("'" + prefix_ + "': tokens [" + std::to_string(offset_tokens) + ", " +
                      std::to_string(offset_tokens + length_tokens) + ") of sequence " +
                      std::to_string(sequence) + " are outside its " + std::to_string(len) +
                      " tokens");
  }
  return GetUnchecked(sequence, offset_tokens, length_tokens);
}

uint64_t IndexedDataset::index_xxh3() const {
  std::call_once(digest_->once, [this] {
    const std::span<const std::byte> index = idx_.bytes();
    XXH3_state_t* state = XXH3_createState();
    GRIDFEED_CHECK(state != nullptr);
    // The same digest as XXH3_64bits over the whole index, streamed in parts: read through a
    // descriptor onto the mapped file (see MappedFileReader), else through the mapping,
    // dropping its pages behind.
    XXH3_64bits_reset(state);
    const MappedFileReader reader(idx_);
    bool read = reader.ok();
    if (read) {
      // Page aligned like the offsets it reads (see MappedFileReader::ReadAt).
      const std::span<std::byte> buffer =
          ThreadScratch(ScratchSlot::kIndexDigest, std::min(index.size(), size_t{1} << 20));
      for (size_t at = 0; read && at < index.size(); at += buffer.size()) {
        const auto part = std::span(buffer.data(), buffer.size())
                              .first(std::min(buffer.size(), index.size() - at));
        read = reader.ReadAt(at, part);
        if (read) XXH3_64bits_update(state, part.data(), part.size());
      }
    }
    if (!read) {
      XXH3_64bits_reset(state);
      constexpr size_t kPart = size_t{32} << 20;
      for (size_t at = 0; at < index.size(); at += kPart) {
        const auto part = index.subspan(at, std::min(kPart, index.size() - at));
        XXH3_64bits_update(state, part.data(), part.size());
        idx_.DropPages(part);
      }
    }
    digest_->value = XXH3_64bits_digest(state);
    XXH3_freeState(state);
  });
  return digest_->value;
}

bool IndexedDataset::CopySequenceLengths(int64_t begin, int64_t end, int32_t* out) const {
  if constexpr (std::endian::native != std::endian::little) return false;
  if (end <= begin) return true;
  const MappedFileReader reader(idx_);
  const std::byte* from = view_.sequence_lengths.bytes().data() + static_cast<size_t>(begin) * 4;
  const auto bytes = std::as_writable_bytes(std::span(out, static_cast<size_t>(end - begin)));
  return reader.ok() && reader.ReadAt(static_cast<uint64_t>(from - idx_.bytes().data()), bytes);
}

bool IndexedDataset::Unchanged() const {
  const auto idx = FileIdentity(idx_.path());
  const auto bin = FileIdentity(bin_.path());
  return idx.ok() && bin.ok() && *idx == idx_.identity() && *bin == bin_.identity();
}

}  // namespace gridfeed::io
