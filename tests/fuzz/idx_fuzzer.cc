// libFuzzer target for the .idx parser: any byte string must give a view or a DataLoss
// status, never a crash or an out-of-bounds read; an accepted view must be self-consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "gridfeed/io/index_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool multimodal = size > 0 && (data[size - 1] & 1);
  auto bytes = std::as_bytes(std::span(data, size));
  auto view = gridfeed::io::ParseIndex(bytes, "fuzz.idx", multimodal);
  if (!view.ok()) {
    if (view.status().code() != gridfeed::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  // Touch every element the view claims to have.
  uint64_t tokens = 0;
  for (size_t i = 0; i < view->sequence_lengths.size(); ++i) {
    tokens += static_cast<uint64_t>(view->sequence_lengths[i]);
    (void)view->sequence_pointers[i];
  }
  for (size_t i = 0; i < view->document_indices.size(); ++i) (void)view->document_indices[i];
  for (size_t i = 0; i < view->sequence_modes.size(); ++i) (void)view->sequence_modes[i];
  if (tokens != view->total_tokens) std::abort();
  return 0;
}
