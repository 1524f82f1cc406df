#include "gridfeed/order/sample.h"

#include <algorithm>

namespace gridfeed::order {

void AssembleSample(const io::IndexedDataset& ds, const GptTablesView& t, int64_t index,
                    const SampleOptions& o, Sample* out) {
  const int64_t S = o.seq_length;
  const int64_t x = o.add_extra_token ? 1 : 0;
  const int64_t j = t.ShuffleAt(index);
  const int64_t d0 = t.SampleDoc(j), o0 = t.SampleOffset(j);
  const int64_t d1 = t.SampleDoc(j + 1), o1 = t.SampleOffset(j + 1);

  std::vector<int64_t> raw(static_cast<size_t>(S + x), o.pad_id);
  int64_t n = 0;
  auto append = [&](int64_t seq, int64_t offset, int64_t length) {
    length = std::min(length, S + x - n);  // never past S + x (only the padded tail is short)
    if (length <= 0) return;
    ds.GetUnchecked(seq, offset, length).CopyTo(raw.data() + n);
    n += length;
  };
  auto lengths = ds.sequence_lengths();
  if (d0 == d1) {
    append(t.document_index[d0], o0, o1 - o0 + x);
  } else {
    const int64_t first = t.document_index[d0];
    append(first, o0, lengths[first] - o0);
    for (int64_t d = d0 + 1; d < d1; ++d) {
      const int64_t s = t.document_index[d];
      append(s, 0, lengths[s]);
    }
    append(t.document_index[d1], 0, o1 + x);
  }

  out->tokens.assign(raw.begin(), raw.begin() + S);
  if (x) {
    out->labels.assign(raw.begin() + 1, raw.end());
  } else {
    out->labels.assign(raw.begin() + 1, raw.end());
    out->labels.push_back(o.pad_id);
  }
  out->loss_mask.assign(static_cast<size_t>(S), 1.0f);
  out->position_ids.resize(static_cast<size_t>(S));
  for (int64_t i = 0; i < S; ++i) out->position_ids[i] = i;
  out->attention_mask.clear();
  if (o.create_attention_mask) {
    out->attention_mask.assign(static_cast<size_t>(S * S), 0);
    for (int64_t r = 0; r < S; ++r) {
      for (int64_t c = r + 1; c < S; ++c) out->attention_mask[r * S + c] = 1;
    }
  }
  if (o.eod_mask_loss) {
    for (int64_t i = 0; i < S; ++i) {
      if (out->tokens[i] == o.eod_id) out->loss_mask[i] = 0.0f;
    }
  }
  if (o.reset_position_ids || o.reset_attention_mask) {
    int64_t prev = 0;
    for (int64_t i = 0; i < S; ++i) {
      if (out->tokens[i] != o.eod_id) continue;
      if (o.reset_attention_mask && o.create_attention_mask) {
        for (int64_t r = i + 1; r < S; ++r) {
          std::fill_n(out->attention_mask.begin() + r * S, i + 1, uint8_t{1});
        }
      }
      if (o.reset_position_ids) {
        for (int64_t k = i + 1; k < S; ++k) out->position_ids[k] -= i + 1 - prev;
        prev = i + 1;
      }
    }
  }
  // Pad clean-up, after masks and positions, in Megatron's order.
  for (int64_t i = 0; i < S; ++i) {
    if (out->labels[i] == o.pad_id) out->loss_mask[i] = 0.0f;
    if (out->tokens[i] == o.pad_id) out->tokens[i] = 0;
    if (out->labels[i] == o.pad_id) out->labels[i] = 0;
  }
}

}  // namespace gridfeed::order
