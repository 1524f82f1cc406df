// Parser and validator of Megatron's .idx format (see README "Token store").
//
// ParseIndex checks every field before anything is used: magic, version, dtype code, counts
// against the file size, lengths >= 0, pointers equal to the running sum of length x dtype
// size, document indices starting at 0, non-decreasing and ending at the sequence count.
// Errors are DataLoss with the file name, the field, expected and actual values.
// The returned view points into `bytes`, which must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "gridfeed/core/status.h"
#include "gridfeed/io/dtype.h"
#include "gridfeed/io/le_span.h"
#include "gridfeed/io/mmap_file.h"

namespace gridfeed::io {

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
// Header: magic (9 bytes), u64 version, u8 dtype code, u64 sequence count, u64 document count.
inline constexpr size_t kIndexVersionOffset = sizeof(kIndexMagic);
inline constexpr size_t kIndexDtypeOffset = kIndexVersionOffset + 8;
inline constexpr size_t kIndexSequencesOffset = kIndexDtypeOffset + 1;
inline constexpr size_t kIndexDocumentsOffset = kIndexSequencesOffset + 8;
inline constexpr size_t kIndexHeaderBytes = kIndexDocumentsOffset + 8;  // 34
static_assert(kIndexHeaderBytes == 34);

struct IndexView {
  DType dtype = DType::kUInt16;
  LeSpan<int32_t> sequence_lengths;   // [S] tokens per sequence
  LeSpan<int64_t> sequence_pointers;  // [S] byte offset of each sequence in .bin
  LeSpan<int64_t> document_indices;   // [D] first sequence of each document, then S
  LeSpan<int8_t> sequence_modes;      // [S] only for multimodal files, else empty
  uint64_t total_tokens = 0;          // sum of sequence_lengths
  uint64_t bin_bytes_needed = 0;      // end of the last sequence in .bin
};

// `path` is used in messages only. `multimodal`: the file has a trailing int8 mode per
// sequence (the header does not say so; Megatron's caller knows).
// kStructure checks the header, the counts against the file size and the last sequence's
// extent only: for a reader whose file another process on the machine has just checked in
// full (the same device, inode, size and mtime), where the per-element pass would only repeat
// that work.
enum class IndexCheck { kFull, kStructure };
// `checked`, if set, is called with each part of the pointers and document indices that the
// full check read through `bytes` once it has passed over it (16 MB at a time), so the caller
// can drop those pages of a mapped file. (Not the lengths: every order reads them next.)
using CheckedFn = std::function<void(std::span<const std::byte>)>;
// `reader`, if usable: a descriptor onto the file `bytes` maps (MappedFileReader), through which
// the full check reads its parts (the mapping's pages are then not touched; on a read error a
// part is read from `bytes`). Same verdicts either way.
// `in_order`, if set, is fed every byte of the file exactly once, in file order, during the
// full check (the pointers and document indices as the check reads them; the header and
// lengths in a pass of their own before, the rest after), so a caller can digest the file
// without a second pass over it. Complete only when the full check returns a view.
using InOrderFn = std::function<void(std::span<const std::byte>)>;
Result<IndexView> ParseIndex(std::span<const std::byte> bytes, const std::string& path,
                             bool multimodal, IndexCheck check = IndexCheck::kFull,
                             const CheckedFn& checked = {},
                             const MappedFileReader* reader = nullptr,
                             const InOrderFn& in_order = {});

}  // namespace gridfeed::io
