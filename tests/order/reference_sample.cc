#include "order/reference_sample.h"

#include <algorithm>
#include <climits>
#include <numeric>

namespace gridfeed::testing {

using order::GptTablesView;
using order::Sample;
using order::SampleOptions;

void ReferenceAssembleSample(const io::IndexedDataset& ds, const GptTablesView& t, int64_t index,
                             const SampleOptions& o, Sample* out) {
  const int64_t S = o.seq_length;
  const int64_t x = o.add_extra_token ? 1 : 0;
  const int64_t j = t.ShuffleAt(index);
  const int64_t d0 = t.SampleDoc(j), o0 = t.SampleOffset(j);
  const int64_t d1 = t.SampleDoc(j + 1), o1 = t.SampleOffset(j + 1);

  // Gather straight into `tokens` (S + x long for now); labels are copied from it.
  std::vector<int64_t>& raw = out->tokens;
  raw.resize(static_cast<size_t>(S + x));
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
  std::fill(raw.begin() + n, raw.end(), o.pad_id);  // only a partial last sample

  out->labels.resize(static_cast<size_t>(S));
  if (x) {
    std::copy_n(raw.begin() + 1, S, out->labels.begin());
  } else {
    std::copy_n(raw.begin() + 1, S - 1, out->labels.begin());
    out->labels[S - 1] = o.pad_id;
  }
  out->tokens.resize(static_cast<size_t>(S));
  out->loss_mask.resize(static_cast<size_t>(S));
  out->position_ids.resize(static_cast<size_t>(S));
  std::iota(out->position_ids.begin(), out->position_ids.end(), int64_t{0});
  out->attention_mask.clear();
  if (o.create_attention_mask) {
    out->attention_mask.assign(static_cast<size_t>(S * S), 0);
    for (int64_t r = 0; r < S; ++r) {
      for (int64_t c = r + 1; c < S; ++c) out->attention_mask[r * S + c] = 1;
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
  // Loss mask (EOD inputs with eod_mask_loss, pad labels) and pad clean-up, after masks and
  // positions were computed from the original tokens, as Megatron orders it.
  const int64_t pad = o.pad_id, eod = o.eod_id;
  const bool eod_mask = o.eod_mask_loss;
  int64_t* tokens = out->tokens.data();
  int64_t* labels = out->labels.data();
  float* loss = out->loss_mask.data();
  // Fast path: a full sample whose tokens all lie above the pad id has nothing to clean up.
  const bool full = n == S + x && (x == 1 || pad != labels[S - 1]);
  bool pad_possible = !full;
  if (!pad_possible) {
    int64_t lowest = INT64_MAX;
    for (int64_t i = 0; i < S; ++i) lowest = std::min(lowest, tokens[i]);
    lowest = std::min(lowest, labels[S - 1]);
    pad_possible = lowest <= pad || pad >= 0;
  }
  if (!pad_possible) {
    if (eod_mask) {
      for (int64_t i = 0; i < S; ++i) loss[i] = tokens[i] == eod ? 0.0f : 1.0f;
    } else {
      std::fill_n(loss, S, 1.0f);
    }
    return;
  }
  for (int64_t i = 0; i < S; ++i) {
    const int64_t tk = tokens[i], lb = labels[i];
    loss[i] = ((eod_mask && tk == eod) || lb == pad) ? 0.0f : 1.0f;
    tokens[i] = tk == pad ? 0 : tk;
    labels[i] = lb == pad ? 0 : lb;
  }
}

}  // namespace gridfeed::testing
