// OLMo's token files as MemMapDataset reads them: raw headerless little-endian uint16/uint32
// arrays (named .npy, but without a header), optional label-mask files (one byte 0/1 per
// token), cut into instances of chunk_size tokens that never cross a file (each file's tail
// is dropped; a file shorter than a chunk contributes none; the same path may repeat).
// Memory-mapped; move-only; const methods are thread safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/mmap_file.h"

namespace gridfeed::io {

struct OlmoFileFacts {
  std::string path;
  int64_t bytes = 0;
  int64_t tokens = 0;
  int64_t instances = 0;  // floor(bytes / (itemsize * chunk_size))
  int64_t dropped_tail_tokens = 0;
  int64_t start = 0;  // first instance (offsets[k] = [start, start + instances))
};

class OlmoTokenFiles {
 public:
  // `token_size` 2 (uint16) or 4 (uint32). `label_mask_paths` empty or one per path; a mask
  // file's instance count (at one byte per token) must equal its token file's. Errors name
  // the file: NotFound, IoError, InvalidArgument (no paths, size not a multiple of the token
  // size, mask count mismatch, chunk_size < 1).
  static Result<OlmoTokenFiles> Open(const std::vector<std::string>& paths,
                                     const std::vector<std::string>& label_mask_paths,
                                     int token_size, int64_t chunk_size);
  // Only the sizes (no mapping): what the table build needs.
  static Result<std::vector<OlmoFileFacts>> Stat(const std::vector<std::string>& paths,
                                                 const std::vector<std::string>& label_mask_paths,
                                                 int token_size, int64_t chunk_size);

  OlmoTokenFiles() = default;
  OlmoTokenFiles(OlmoTokenFiles&&) noexcept = default;
  OlmoTokenFiles& operator=(OlmoTokenFiles&&) noexcept = default;

  int64_t size() const { return size_; }  // instances, len(dataset)
  int64_t chunk_size() const { return chunk_size_; }
  int token_size() const { return token_size_; }
  bool has_label_masks() const { return !masks_.empty(); }
  const std::vector<OlmoFileFacts>& files() const { return facts_; }
  // The file holding instance i (0 <= i < size()): the last range that contains it.
  int FileOf(int64_t instance) const;
  // Tokens of instance i widened to int64 (`out` has chunk_size entries).
  void ReadInstance(int64_t instance, std::span<int64_t> out) const;
  // The whole token file k (for store facts).
  std::span<const std::byte> bytes(size_t k) const { return files_[k].bytes(); }
  // Its label mask, 0/1 (`out` has chunk_size entries). REQUIRES has_label_masks().
  void ReadLabelMask(int64_t instance, std::span<uint8_t> out) const;

 private:
  std::vector<OlmoFileFacts> facts_;
  std::vector<MMapFile> files_;  // one per path (a repeated path is mapped again)
  std::vector<MMapFile> masks_;
  int64_t size_ = 0;
  int64_t chunk_size_ = 0;
  int token_size_ = 2;
};

}  // namespace gridfeed::io
