#include "gridfeed/io/olmo_token_files.h"

#include <algorithm>
#include <cstring>

namespace gridfeed::io {
namespace {

Status CheckArguments(const std::vector<std::string>& paths,
                      const std::vector<std::string>& label_mask_paths, int token_size,
                      int64_t chunk_size) {
  if (paths.empty()) return InvalidArgument("OLMo token files: no paths");
  if (token_size != 2 && token_size != 4) {
    return InvalidArgument("OLMo token files: token size " + std::to_string(token_size) +
                           " bytes (uint16 or uint32 expected)");
  }
  if (chunk_size < 1) {
    return InvalidArgument("OLMo token files: chunk size (max_sequence_length) must be >= 1, got " +
                           std::to_string(chunk_size));
  }
  if (!label_mask_paths.empty() && label_mask_paths.size() != paths.size()) {
    return InvalidArgument("OLMo token files: " + std::to_string(label_mask_paths.size()) +
                           " label-mask paths for " + std::to_string(paths.size()) +
                           " token files");
  }
  return Status::Ok();
}

// One file's facts from its size; `start` is the first instance it holds.
Result<OlmoFileFacts> FactsOf(const std::string& path, size_t bytes, int token_size,
                              int64_t chunk_size, int64_t start) {
  if (bytes % static_cast<size_t>(token_size) != 0) {
    return InvalidArgument("OLMo token file '" + path + "': " + std::to_string(bytes) +
                           " bytes is not a multiple of the token size " +
                           std::to_string(token_size) + " (wrong memmap_dtype?)");
  }
  OlmoFileFacts f;
  f.path = path;
  f.bytes = static_cast<int64_t>(bytes);
  f.tokens = f.bytes / token_size;
  f.instances = f.tokens / chunk_size;  // the tail shorter than a chunk is dropped
  f.dropped_tail_tokens = f.tokens - f.instances * chunk_size;
  f.start = start;
  return f;
}

// A label-mask file (one byte per token) must hold as many instances as its token file.
Status CheckMask(const std::string& mask_path, size_t mask_bytes, const OlmoFileFacts& tokens,
                 int64_t chunk_size) {
  const int64_t mask_instances = static_cast<int64_t>(mask_bytes) / chunk_size;
  if (mask_instances == tokens.instances) return Status::Ok();
  return InvalidArgument("OLMo label-mask file '" + mask_path + "' holds " +
                         std::to_string(mask_instances) + " instances but its token file '" +
                         tokens.path + "' holds " + std::to_string(tokens.instances));
}

}  // namespace

Result<std::vector<OlmoFileFacts>> OlmoTokenFiles::Stat(
    const std::vector<std::string>& paths, const std::vector<std::string>& label_mask_paths,
    int token_size, int64_t chunk_size) {
  GRIDFEED_RETURN_IF_ERROR(CheckArguments(paths, label_mask_paths, token_size, chunk_size));
  std::vector<OlmoFileFacts> facts;
  int64_t start = 0;
  for (size_t k = 0; k < paths.size(); ++k) {
    GRIDFEED_ASSIGN_OR_RETURN(const size_t bytes, FileSize(paths[k]));
    GRIDFEED_ASSIGN_OR_RETURN(OlmoFileFacts f,
                              FactsOf(paths[k], bytes, token_size, chunk_size, start));
    if (!label_mask_paths.empty()) {
      GRIDFEED_ASSIGN_OR_RETURN(const size_t mask_bytes, FileSize(label_mask_paths[k]));
      GRIDFEED_RETURN_IF_ERROR(CheckMask(label_mask_paths[k], mask_bytes, f, chunk_size));
    }
    start += f.instances;
    facts.push_back(std::move(f));
  }
  return facts;
}

Result<OlmoTokenFiles> OlmoTokenFiles::Open(const std::vector<std::string>& paths,
                                            const std::vector<std::string>& label_mask_paths,
                                            int token_size, int64_t chunk_size) {
  GRIDFEED_RETURN_IF_ERROR(CheckArguments(paths, label_mask_paths, token_size, chunk_size));
  OlmoTokenFiles t;
  t.token_size_ = token_size;
  t.chunk_size_ = chunk_size;
  for (size_t k = 0; k < paths.size(); ++k) {
    GRIDFEED_ASSIGN_OR_RETURN(MMapFile file, MMapFile::Open(paths[k]));
    GRIDFEED_ASSIGN_OR_RETURN(OlmoFileFacts f,
                              FactsOf(paths[k], file.size(), token_size, chunk_size, t.size_));
    if (!label_mask_paths.empty()) {
      GRIDFEED_ASSIGN_OR_RETURN(MMapFile mask, MMapFile::Open(label_mask_paths[k]));
      GRIDFEED_RETURN_IF_ERROR(CheckMask(label_mask_paths[k], mask.size(), f, chunk_size));
      t.masks_.push_back(std::move(mask));
    }
    t.size_ += f.instances;
    t.facts_.push_back(std::move(f));
    t.files_.push_back(std::move(file));
  }
  return t;
}

int OlmoTokenFiles::FileOf(int64_t instance) const {
  // Ranges are consecutive, so the last file starting at or before `instance` holds it (an
  // empty range there would start after it).
  auto it = std::upper_bound(facts_.begin(), facts_.end(), instance,
                             [](int64_t i, const OlmoFileFacts& f) { return i < f.start; });
  return static_cast<int>(it - facts_.begin()) - 1;
}

void OlmoTokenFiles::ReadInstance(int64_t instance, std::span<int64_t> out) const {
  const int k = FileOf(instance);
  const std::byte* p =
      files_[k].bytes().data() + (instance - facts_[k].start) * chunk_size_ * token_size_;
  if (token_size_ == 2) {
    for (int64_t t = 0; t < chunk_size_; ++t) {
      uint16_t v;
      std::memcpy(&v, p + t * 2, 2);
      out[t] = v;
    }
  } else {
    for (int64_t t = 0; t < chunk_size_; ++t) {
      uint32_t v;
      std::memcpy(&v, p + t * 4, 4);
      out[t] = v;
    }
  }
}

void OlmoTokenFiles::ReadLabelMask(int64_t instance, std::span<uint8_t> out) const {
  const int k = FileOf(instance);
  const std::byte* p = masks_[k].bytes().data() + (instance - facts_[k].start) * chunk_size_;
  for (int64_t t = 0; t < chunk_size_; ++t) out[t] = p[t] != std::byte{0} ? 1 : 0;
}

}  // namespace gridfeed::io
