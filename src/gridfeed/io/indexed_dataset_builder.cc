#include "gridfeed/io/indexed_dataset_builder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "gridfeed/io/index_file.h"

namespace gridfeed::io {

Result<IndexedDatasetBuilder> IndexedDatasetBuilder::Create(const std::string& prefix, DType dtype,
                                                            bool multimodal) {
  GRIDFEED_ASSIGN_OR_RETURN(AtomicFile bin, AtomicFile::Create(prefix + ".bin"));
  return IndexedDatasetBuilder(prefix, dtype, multimodal, std::move(bin));
}

Status IndexedDatasetBuilder::AddItem(std::span<const int64_t> tokens, int8_t mode) {
  if (finalized_) return FailedPrecondition("AddItem after Finalize on '" + prefix_ + "'");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return OutOfRange("sequence of " + std::to_string(tokens.size()) +
                      " tokens does not fit the int32 length field");
  }
  const size_t item = DTypeSize(dtype_);
  scratch_.resize(tokens.size() * item);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!DTypeHolds(dtype_, tokens[i])) {
      return OutOfRange("token id " + std::to_string(tokens[i]) + " at position " +
                        std::to_string(i) + " does not fit dtype " +
                        std::string(DTypeName(dtype_)));
    }
    StoreFromInt64(dtype_, scratch_.data(), i, tokens[i]);
  }
  GRIDFEED_RETURN_IF_ERROR(bin_.Write(scratch_));
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  if (multimodal_) modes_.push_back(mode);
  num_tokens_ += tokens.size();
  return Status::Ok();
}

Status IndexedDatasetBuilder::Finalize() {
  if (finalized_) return FailedPrecondition("Finalize called twice on '" + prefix_ + "'");
  finalized_ = true;
  GRIDFEED_ASSIGN_OR_RETURN(AtomicFile idx, AtomicFile::Create(prefix_ + ".idx"));
  const uint64_t version = kIndexVersion;
  const uint8_t code = static_cast<uint8_t>(dtype_);
  const uint64_t s = lengths_.size();
  const uint64_t d = document_indices_.size();
  GRIDFEED_RETURN_IF_ERROR(idx.Write(kIndexMagic, sizeof(kIndexMagic)));
  GRIDFEED_RETURN_IF_ERROR(idx.Write(&version, 8));
  GRIDFEED_RETURN_IF_ERROR(idx.Write(&code, 1));
  GRIDFEED_RETURN_IF_ERROR(idx.Write(&s, 8));
  GRIDFEED_RETURN_IF_ERROR(idx.Write(&d, 8));
  GRIDFEED_RETURN_IF_ERROR(idx.Write(lengths_.data(), s * 4));
  std::vector<int64_t> pointers(s);
  int64_t running = 0;
  const int64_t item = static_cast<int64_t>(DTypeSize(dtype_));
  for (uint64_t i = 0; i < s; ++i) {
    pointers[i] = running;
    running += int64_t{lengths_[i]} * item;
  }
  GRIDFEED_RETURN_IF_ERROR(idx.Write(pointers.data(), s * 8));
  GRIDFEED_RETURN_IF_ERROR(idx.Write(document_indices_.data(), d * 8));
  if (multimodal_) GRIDFEED_RETURN_IF_ERROR(idx.Write(modes_.data(), modes_.size()));
  // Both files are complete before either appears under its final name.
  GRIDFEED_RETURN_IF_ERROR(bin_.Commit(/*publish=*/false));
  GRIDFEED_RETURN_IF_ERROR(idx.Commit(/*publish=*/false));
  // The old index goes first: a kill between the two renames then leaves a .bin without an
  // .idx (refused as missing), never a new .bin beside the old .idx.
  if (::unlink((prefix_ + ".idx").c_str()) != 0 && errno != ENOENT) {
    return IoError("cannot remove the old index '" + prefix_ +
                   ".idx' before publishing: " + std::strerror(errno));
  }
  GRIDFEED_RETURN_IF_ERROR(bin_.Publish());
  return idx.Publish();
}

}  // namespace gridfeed::io
