// IndexedDataset: a validated, memory-mapped Megatron token store (PREFIX.bin + PREFIX.idx).
//
// Open() validates the whole index and checks that .bin holds every sequence, so no later
// access can read out of bounds. Move-only; spans returned by accessors point into the
// mappings and stay valid as long as this object lives. Thread safety: all methods are const
// and may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "gridfeed/core/status.h"
#include "gridfeed/io/dtype.h"
#include "gridfeed/io/index_file.h"
#include "gridfeed/io/mmap_file.h"

namespace gridfeed::io {

// A run of tokens of one sequence, in the file's dtype, inside the .bin mapping.
struct TokenSpan {
  DType dtype = DType::kUInt16;
  const std::byte* data = nullptr;
  int64_t length_tokens = 0;

  int64_t operator[](int64_t i) const { return LoadAsInt64(dtype, data, static_cast<size_t>(i)); }
  std::span<const std::byte> bytes() const {
    return {data, static_cast<size_t>(length_tokens) * DTypeSize(dtype)};
  }
  // Widens the tokens into out[0 .. length_tokens).
  void CopyTo(int64_t* out) const;
};

class IndexedDataset {
 public:
  // `digest` (with the full check): also computes index_xxh3() (remembered) from the bytes
  // the check reads, for a caller that will name the data by it: one pass over the index
  // rather than two (146.5M documents: a 2.9 GB index).
  static Result<IndexedDataset> Open(const std::string& prefix, bool multimodal = false,
                                     IndexCheck check = IndexCheck::kFull, bool digest = false);
  // The full check of a store opened with IndexCheck::kStructure, run later (e.g. on a thread
  // beside work that needs only the lengths): the same pass and verdict as Open's kFull, the
  // digest remembered when asked for. Until it returns Ok, only the header's counts, the
  // lengths (unchecked: possibly negative) and the last sequence's extent are known good.
  // Thread safe; const (reads through a descriptor, drops the pages it mapped).
  Status CheckIndexFully(bool digest) const;

  IndexedDataset(IndexedDataset&&) noexcept = default;
  IndexedDataset& operator=(IndexedDataset&&) noexcept = default;

  const std::string& prefix() const { return prefix_; }
  DType dtype() const { return view_.dtype; }
  int64_t num_sequences() const { return static_cast<int64_t>(view_.sequence_lengths.size()); }
  // Documents = document index entries - 1.
  int64_t num_documents() const { return static_cast<int64_t>(view_.document_indices.size()) - 1; }
  uint64_t num_tokens() const { return view_.total_tokens; }
  LeSpan<int32_t> sequence_lengths() const { return view_.sequence_lengths; }
  LeSpan<int64_t> sequence_pointers() const { return view_.sequence_pointers; }
  LeSpan<int64_t> document_indices() const { return view_.document_indices; }
  LeSpan<int8_t> sequence_modes() const { return view_.sequence_modes; }
  std::span<const std::byte> index_bytes() const { return idx_.bytes(); }
  // Drops this process's mapped copies of `part` of index_bytes() (see MMapFile::DropPages):
  // after a pass over a large index, so it does not stay counted in resident memory.
  void DropIndexPages(std::span<const std::byte> part) const { idx_.DropPages(part); }
  std::span<const std::byte> data_bytes() const { return bin_.bytes(); }
  // The mapped .bin (its path and identity, for positional reads of the very same file).
  const MMapFile& data_file() const { return bin_; }
  // XXH3-64 of the whole index file (what the data facts and every reader's store facts name),
  // computed by the first caller and remembered, so a process that needs it twice passes over
  // a multi-GB index once; thread safe. The pass reads through a descriptor onto the mapped
  // file (MappedFileReader), else through the mapping, dropping its pages behind.
  uint64_t index_xxh3() const;
  // Copies sequence_lengths()[begin, end) into `out` (host order) through a descriptor onto the
  // mapped index (MappedFileReader: several times faster than the mapping where page faults
  // are costly); false where it cannot (then read sequence_lengths()). REQUIRES: 0 <= begin <=
  // end <= num_sequences(). Thread safe.
  bool CopySequenceLengths(int64_t begin, int64_t end, int32_t* out) const;
  // Whether PREFIX.idx and PREFIX.bin are still the files this object mapped (FileIdentity:
  // device, inode, size, mtime), so a store opened earlier in the process may serve again.
  bool Unchanged() const;

  // `length_tokens` tokens of `sequence` starting `offset_tokens` in; length -1 = to the end.
  // OutOfRange if the run is not inside the sequence.
  Result<TokenSpan> Get(int64_t sequence, int64_t offset_tokens = 0,
                        int64_t length_tokens = -1) const;
  // Unchecked variant for hot loops whose indices were validated by construction.
  TokenSpan GetUnchecked(int64_t sequence, int64_t offset_tokens, int64_t length_tokens) const {
    const size_t item = DTypeSize(view_.dtype);
    return TokenSpan{view_.dtype,
                     bin_.bytes().data() + view_.sequence_pointers[sequence] +
                         static_cast<size_t>(offset_tokens) * item,
                     length_tokens};
  }

 private:
  IndexedDataset() = default;
  // ParseIndex's full check of idx_ (prefix_.idx), through a descriptor where it can; with
  // `digest`, remembers index_xxh3() from the same reads.
  Result<IndexView> ParseFully(bool multimodal, bool digest) const;

  std::string prefix_;
  bool multimodal_ = false;
  MMapFile idx_;
  MMapFile bin_;
  IndexView view_;
  struct DigestMemo {
    std::once_flag once;
    uint64_t value = 0;
  };
  std::unique_ptr<DigestMemo> digest_ = std::make_unique<DigestMemo>();
};

}  // namespace gridfeed::io
