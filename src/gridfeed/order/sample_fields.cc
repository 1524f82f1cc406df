#include "gridfeed/order/sample_fields.h"

#include <algorithm>
#include <cstring>
#include <utility>

// The field loops are also built for AVX2 (twice the lanes of x86-64's SSE2 baseline) and the
// copy the CPU runs is picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GRIDFEED_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GRIDFEED_VECTOR_CLONES
#endif

namespace gridfeed::order {
namespace {

// Calls put(span, at) for each run of sample j's S + x tokens (GPTDataset.__getitem__'s
// concatenation), `at` being where the run starts in the sample. Returns how many tokens the
// sample has (fewer than S + x only for a partial last sample).
template <typename Put>
int64_t Gather(const io::IndexedDataset& ds, const GptTablesView& t, int64_t j,
               const SampleOptions& o, Put put) {
  const int64_t S = o.seq_length;
  const int64_t x = o.add_extra_token ? 1 : 0;
  const int64_t d0 = t.SampleDoc(j), o0 = t.SampleOffset(j);
  const int64_t d1 = t.SampleDoc(j + 1), o1 = t.SampleOffset(j + 1);
  int64_t n = 0;
  auto append = [&](int64_t seq, int64_t offset, int64_t length) {
    length = std::min(length, S + x - n);  // never past S + x (only the padded tail is short)
    if (length <= 0) return;
    put(ds.GetUnchecked(seq, offset, length), n);
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
  return n;
}

// The pad and EOD ids as tokens of type T; an id T cannot hold equals no token.
template <typename T>
struct Ids {
  explicit Ids(const SampleOptions& o)
      : pad_fits(std::in_range<T>(o.pad_id)),
        eod_fits(std::in_range<T>(o.eod_id)),
        pad(pad_fits ? static_cast<T>(o.pad_id) : T{0}),
        eod(eod_fits ? static_cast<T>(o.eod_id) : T{0}) {}
  bool pad_fits, eod_fits;
  T pad, eod;
  bool IsEod(T v) const { return eod_fits && v == eod; }
};

// One past the last EOD among v[0, i): where position i's document starts.
template <typename T>
int64_t DocumentStart(const T* v, int64_t i, const Ids<T>& ids) {
  for (int64_t k = i - 1; k >= 0; --k) {
    if (ids.IsEod(v[k])) return k + 1;
  }
  return 0;
}

// Fields of sequence positions [b, e) into the targets' elements [at, at + e - b), from the
// sample's tokens v (v[i + 1] is input i's label; with `no_last_label` v[S] is absent and
// stands for the pad id). Megatron computes masks and positions from the tokens before the pad
// clean-up; so does this. Each field is one loop the compiler vectorises (comparisons in T).
template <typename T>
[[gnu::always_inline]] inline void WriteRange(const T* v, int64_t b, int64_t e, int64_t at,
                                              bool no_last_label, const Ids<T>& ids,
                                              const SampleOptions& o, const FieldTargets& out) {
  const int64_t S = o.seq_length;
  const int64_t n = e - b;
  const T* in = v + b;
  const T pad = ids.pad, eod = ids.eod;
  // Inputs whose label is in v; the one after (only at S - 1) gets the pad's: label 0, loss 0.
  const int64_t m = no_last_label && e == S ? n - 1 : n;
  if (out.tokens) {
    int64_t* d = out.tokens + at;
    if (ids.pad_fits) {
      for (int64_t i = 0; i < n; ++i) d[i] = in[i] == pad ? T{0} : in[i];
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = in[i];
    }
  }
  if (out.labels) {
    int64_t* d = out.labels + at;
    if (ids.pad_fits) {
      for (int64_t i = 0; i < m; ++i) d[i] = in[i + 1] == pad ? T{0} : in[i + 1];
    } else {
      for (int64_t i = 0; i < m; ++i) d[i] = in[i + 1];
    }
    if (m < n) d[m] = 0;
  }
  if (out.loss_mask) {
    float* d = out.loss_mask + at;
    const bool eods = o.eod_mask_loss && ids.eod_fits;
    if (eods && ids.pad_fits) {
      for (int64_t i = 0; i < m; ++i) d[i] = (in[i] == eod) | (in[i + 1] == pad) ? 0.0f : 1.0f;
    } else if (eods) {
      for (int64_t i = 0; i < m; ++i) d[i] = in[i] == eod ? 0.0f : 1.0f;
    } else if (ids.pad_fits) {
      for (int64_t i = 0; i < m; ++i) d[i] = in[i + 1] == pad ? 0.0f : 1.0f;
    } else {
      std::fill_n(d, m, 1.0f);
    }
    if (m < n) d[m] = 0.0f;
  }
  const bool reset_positions = out.position_ids && o.reset_position_ids;
  const bool mask = out.attention_mask && o.create_attention_mask;
  const bool reset_mask = mask && o.reset_attention_mask;
  if (out.position_ids && !reset_positions) {
    int64_t* d = out.position_ids + at;
    for (int64_t i = 0; i < n; ++i) d[i] = b + i;
  }
  if (!reset_positions && !mask) return;
  // Position q's document start, kept up to date only where resets ask for it.
  int64_t start = (reset_positions || reset_mask) ? DocumentStart(v, b, ids) : 0;
  for (int64_t q = b; q < e; ++q) {
    if (reset_positions) out.position_ids[at + q - b] = q - start;
    if (mask) {
      // Row q: keys after q are masked (causal); with resets, so are earlier documents'.
      uint8_t* row = out.attention_mask + (at + q - b) * S;
      const int64_t from = reset_mask ? start : 0;
      std::memset(row, 1, static_cast<size_t>(from));
      std::memset(row + from, 0, static_cast<size_t>(q + 1 - from));
      std::memset(row + q + 1, 1, static_cast<size_t>(S - q - 1));
    }
    if (ids.IsEod(v[q])) start = q + 1;
  }
}

// Calls f(begin, end, at) for each sequence range of this CP rank's slice, in slice order.
template <typename F>
void ForEachSliceRange(int64_t S, int64_t cp, int64_t rank, F f) {
  if (cp <= 1) return f(int64_t{0}, S, int64_t{0});
  const int64_t chunk = S / (2 * cp);
  f(rank * chunk, (rank + 1) * chunk, int64_t{0});
  const int64_t mirror = 2 * cp - 1 - rank;
  f(mirror * chunk, (mirror + 1) * chunk, chunk);
}

// Every range of this CP rank's slice.
template <typename T>
GRIDFEED_VECTOR_CLONES void WriteSlice(const T* v, bool no_last_label, const Ids<T>& ids,
                                       const SampleOptions& o, const FieldTargets& out) {
  // Spelled out, not ForEachSliceRange: a lambda would be compiled for the baseline only.
  const int64_t S = o.seq_length;
  if (out.cp_size <= 1) {
    WriteRange(v, 0, S, 0, no_last_label, ids, o, out);
    return;
  }
  const int64_t chunk = S / (2 * out.cp_size);
  const int64_t mirror = 2 * out.cp_size - 1 - out.cp_rank;
  WriteRange(v, out.cp_rank * chunk, (out.cp_rank + 1) * chunk, 0, no_last_label, ids, o, out);
  WriteRange(v, mirror * chunk, (mirror + 1) * chunk, chunk, no_last_label, ids, o, out);
}

// A whole sample in the store's integer type T, gathered with memcpy (no widening pass). False
// for a partial sample (the caller takes the general path).
template <typename T>
bool AssembleInStoreType(const io::IndexedDataset& ds, const GptTablesView& t, int64_t j,
                         const SampleOptions& o, const FieldTargets& out,
                         AssemblyScratch* scratch) {
  const int64_t S = o.seq_length;
  const int64_t x = o.add_extra_token ? 1 : 0;
  scratch->gathered.resize(static_cast<size_t>(S + 1) * sizeof(T));
  std::byte* g = scratch->gathered.data();
  const int64_t n = Gather(ds, t, j, o, [&](const io::TokenSpan& span, int64_t at) {
    std::memcpy(g + at * sizeof(T), span.data, span.bytes().size());
  });
  if (n != S + x) return false;
  // The buffer holds only Ts memcpy'd in, so reading it as T is reading those objects' bytes.
  const T* v = reinterpret_cast<const T*>(g);
  WriteSlice(v, /*no_last_label=*/x == 0, Ids<T>(o), o, out);
  return true;
}

}  // namespace

void AssembleFields(const io::IndexedDataset& ds, const GptTablesView& t, int64_t index,
                    const SampleOptions& o, const FieldTargets& out, AssemblyScratch* scratch) {
  if (!out.tokens && !out.position_ids && !out.labels && !out.loss_mask &&
      !(out.attention_mask && o.create_attention_mask)) {
    return;  // a middle pipeline stage
  }
  const int64_t j = t.ShuffleAt(index);
  switch (ds.dtype()) {
    case io::DType::kUInt16:
      if (AssembleInStoreType<uint16_t>(ds, t, j, o, out, scratch)) return;
      break;
    case io::DType::kInt32:
      if (AssembleInStoreType<int32_t>(ds, t, j, o, out, scratch)) return;
      break;
    case io::DType::kUInt8:
      if (AssembleInStoreType<uint8_t>(ds, t, j, o, out, scratch)) return;
      break;
    case io::DType::kInt8:
      if (AssembleInStoreType<int8_t>(ds, t, j, o, out, scratch)) return;
      break;
    case io::DType::kInt16:
      if (AssembleInStoreType<int16_t>(ds, t, j, o, out, scratch)) return;
      break;
    case io::DType::kInt64:
      if (AssembleInStoreType<int64_t>(ds, t, j, o, out, scratch)) return;
      break;
    case io::DType::kFloat32:
    case io::DType::kFloat64:
      break;
  }
  // General path (partial samples, float stores): widened to int64, the tail and v[S] padded.
  const int64_t S = o.seq_length;
  scratch->raw.resize(static_cast<size_t>(S + 1));
  int64_t* raw = scratch->raw.data();
  const int64_t n =
      Gather(ds, t, j, o, [&](const io::TokenSpan& span, int64_t at) { span.CopyTo(raw + at); });
  std::fill(raw + n, raw + S + 1, o.pad_id);
  WriteSlice<int64_t>(raw, /*no_last_label=*/false, Ids<int64_t>(o), o, out);
}

void GatherWindow(const io::IndexedDataset& ds, const GptTablesView& t, int64_t index,
                  int64_t seq_length, std::vector<int64_t>* window) {
  SampleOptions o;
  o.seq_length = seq_length;
  o.add_extra_token = true;
  window->resize(static_cast<size_t>(seq_length + 1));
  int64_t* w = window->data();
  const int64_t n = Gather(ds, t, t.ShuffleAt(index), o,
                           [&](const io::TokenSpan& span, int64_t at) { span.CopyTo(w + at); });
  window->resize(static_cast<size_t>(n));
}

void WindowFields(const int64_t* window, const SampleOptions& o, const FieldTargets& out) {
  WriteSlice<int64_t>(window, /*no_last_label=*/false, Ids<int64_t>(o), o, out);
}

void SliceFields(const Sample& s, int64_t S, const FieldTargets& out) {
  auto copy = [&](const auto& whole, int64_t inner, auto* dst) {
    if (!dst) return;
    ForEachSliceRange(S, out.cp_size, out.cp_rank, [&](int64_t b, int64_t e, int64_t at) {
      std::copy(whole.begin() + b * inner, whole.begin() + e * inner, dst + at * inner);
    });
  };
  copy(s.tokens, 1, out.tokens);
  copy(s.position_ids, 1, out.position_ids);
  copy(s.labels, 1, out.labels);
  copy(s.loss_mask, 1, out.loss_mask);
  if (!s.attention_mask.empty()) copy(s.attention_mask, S, out.attention_mask);
}

}  // namespace gridfeed::order
