#include "gridfeed/order/olmo/olmo_collator.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace gridfeed::order {
namespace {

// Appends `values` padded to `width` with `pad`, on the left or the right.
template <typename T, typename U>
void AppendPadded(std::vector<T>& out, const std::vector<U>& values, int64_t width, T pad,
                  PadDirection direction) {
  const size_t n = std::min(values.size(), static_cast<size_t>(width));
  const size_t pad_count = static_cast<size_t>(width) - n;
  if (direction == PadDirection::kLeft) out.insert(out.end(), pad_count, pad);
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<T>(values[i]));
  if (direction == PadDirection::kRight) out.insert(out.end(), pad_count, pad);
}

}  // namespace

int64_t CollatedBatch::rows(const char* key) const {
  const auto n = [](const auto& v, int64_t per_row) -> int64_t {
    if (!v.has_value() || per_row == 0) return 0;
    return static_cast<int64_t>(v->size()) / per_row;
  };
  if (std::strcmp(key, "input_ids") == 0) return batch;
  if (std::strcmp(key, "attention_mask") == 0) return n(attention_mask, max_len);
  if (std::strcmp(key, "attention_bias") == 0) return n(attention_bias, max_len * max_len);
  if (std::strcmp(key, "label_mask") == 0) return n(label_mask, max_len);
  if (std::strcmp(key, "index") == 0) return n(index, 1);
  if (std::strcmp(key, "instance_mask") == 0) return n(instance_mask, 1);
  if (std::strcmp(key, "doc_lens") == 0) return n(max_doc_lens, 1);
  if (std::strcmp(key, "max_doc_lens") == 0) return n(max_doc_lens, 1);
  return 0;
}

CollatedBatch Collate(const std::vector<CollatorItem>& items, PadDirection direction,
                      int64_t pad_token_id) {
  CollatedBatch out;
  out.batch = static_cast<int64_t>(items.size());
  for (const auto& item : items) {
    out.max_len = std::max(out.max_len, static_cast<int64_t>(item.input_ids.size()));
  }
  const int64_t m = out.max_len;
  int64_t max_docs = 0;
  for (const auto& item : items) {
    if (item.doc_lens) max_docs = std::max(max_docs, static_cast<int64_t>(item.doc_lens->size()));
  }
  for (const auto& item : items) {
    AppendPadded(out.input_ids, item.input_ids, m, pad_token_id, direction);
    if (item.attention_mask) {
      if (!out.attention_mask) out.attention_mask.emplace();
      AppendPadded(*out.attention_mask, *item.attention_mask, m, 0.0f, direction);
    }
    if (item.attention_bias) {
      // [L, L] padded on both dimensions, on the padding side, with False or -inf.
      if (!out.attention_bias) out.attention_bias.emplace();
      out.attention_bias_is_bool = item.attention_bias_is_bool;
      const double pad =
          item.attention_bias_is_bool ? 0.0 : -std::numeric_limits<double>::infinity();
      const int64_t l = static_cast<int64_t>(item.input_ids.size());
      const int64_t lead = direction == PadDirection::kLeft ? m - l : 0;
      for (int64_t r = 0; r < m; ++r) {
        const int64_t src = r - lead;
        for (int64_t c = 0; c < m; ++c) {
          const int64_t col = c - lead;
          const bool inside = src >= 0 && src < l && col >= 0 && col < l;
          out.attention_bias->push_back(inside ? (*item.attention_bias)[src * l + col] : pad);
        }
      }
    }
    if (item.label_mask) {
      if (!out.label_mask) out.label_mask.emplace();
      AppendPadded(*out.label_mask, *item.label_mask, m, uint8_t{0}, direction);
    }
    if (item.index) {
      if (!out.index) out.index.emplace();
      out.index->push_back(*item.index);
    }
    if (item.instance_mask) {
      if (!out.instance_mask) out.instance_mask.emplace();
      out.instance_mask->push_back(*item.instance_mask ? 1 : 0);
    }
    if (item.doc_lens) {
      // Always right-padded with 0, whatever the padding direction.
      if (!out.doc_lens) out.doc_lens.emplace();
      if (!out.max_doc_lens) out.max_doc_lens.emplace();
      AppendPadded(*out.doc_lens, *item.doc_lens, max_docs, int32_t{0}, PadDirection::kRight);
      int64_t longest = 0;
      for (int32_t d : *item.doc_lens) longest = std::max<int64_t>(longest, d);
      out.max_doc_lens->push_back(longest);
    }
  }
  out.doc_lens_width = max_docs;
  return out;
}

}  // namespace gridfeed::order
