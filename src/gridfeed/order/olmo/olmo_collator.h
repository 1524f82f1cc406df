// OLMo's DataCollator (olmo/data/collator.py): pads a list of items to the longest input_ids
// (left or right), attention_mask -> float32, attention_bias padded with False / -inf,
// label_mask padded with false, doc_lens right-padded with 0 plus max_doc_lens. A key is
// output iff some item has it (rows of items lacking it are skipped, as in OLMo). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gridfeed::order {

struct CollatorItem {
  std::vector<int64_t> input_ids;
  std::optional<std::vector<int64_t>> attention_mask;
  std::optional<std::vector<uint8_t>> label_mask;
  std::optional<std::vector<int32_t>> doc_lens;
  // attention_bias: square [L, L]; bool (stored 0/1 in values) or float.
  std::optional<std::vector<double>> attention_bias;
  bool attention_bias_is_bool = false;
  std::optional<int64_t> index;
  std::optional<bool> instance_mask;
};

struct CollatedBatch {
  int64_t batch = 0, max_len = 0;
  std::vector<int64_t> input_ids;                     // [batch, max_len]
  std::optional<std::vector<float>> attention_mask;   // [rows, max_len]
  std::optional<std::vector<double>> attention_bias;  // [rows, 1, max_len, max_len]
  bool attention_bias_is_bool = false;
  std::optional<std::vector<uint8_t>> label_mask;     // [rows, max_len]
  std::optional<std::vector<int64_t>> index;          // [rows]
  std::optional<std::vector<uint8_t>> instance_mask;  // [rows]
  std::optional<std::vector<int32_t>> doc_lens;       // [rows, max docs]
  std::optional<std::vector<int64_t>> max_doc_lens;   // [rows]
  int64_t doc_lens_width = 0;
  int64_t rows(const char* key) const;  // rows present for an output key
};

enum class PadDirection { kRight, kLeft };
CollatedBatch Collate(const std::vector<CollatorItem>& items, PadDirection direction,
                      int64_t pad_token_id);

}  // namespace gridfeed::order
