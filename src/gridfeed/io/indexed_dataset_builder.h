// IndexedDatasetBuilder: writes PREFIX.bin/.idx byte-identical to Megatron's
// IndexedDatasetBuilder for the same calls: AddItem = add_item (one sequence),
// EndDocument = end_document, Finalize = finalize.
//
// Both files are written under temporary names and appear under PREFIX only when Finalize
// succeeds; a builder destroyed before that leaves nothing behind. Move-only, not thread safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/dtype.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::io {

class IndexedDatasetBuilder {
 public:
  static Result<IndexedDatasetBuilder> Create(const std::string& prefix, DType dtype,
                                              bool multimodal = false);

  // Appends one sequence. OutOfRange (naming the value) if a token does not fit the dtype;
  // nothing is written then.
  Status AddItem(std::span<const int64_t> tokens, int8_t mode = 0);
  // Closes the current document (Megatron appends the sequence count even when the document
  // is empty, so calling it twice records an empty document).
  void EndDocument() { document_indices_.push_back(static_cast<int64_t>(lengths_.size())); }
  Status Finalize();

  int64_t num_sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  uint64_t num_tokens() const { return num_tokens_; }
  DType dtype() const { return dtype_; }

 private:
  IndexedDatasetBuilder(std::string prefix, DType dtype, bool multimodal, AtomicFile bin)
      : prefix_(std::move(prefix)), dtype_(dtype), multimodal_(multimodal), bin_(std::move(bin)) {}

  std::string prefix_;
  DType dtype_;
  bool multimodal_;
  AtomicFile bin_;
  std::vector<int32_t> lengths_;
  std::vector<int8_t> modes_;
  std::vector<int64_t> document_indices_{0};
  std::vector<std::byte> scratch_;
  uint64_t num_tokens_ = 0;
  bool finalized_ = false;
};

}  // namespace gridfeed::io
