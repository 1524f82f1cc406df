#include "gridfeed/order/gpt_tables.h"

#include <cmath>
#include <limits>
#include <span>
#include <thread>

#include "gridfeed/core/stopwatch.h"
#include "gridfeed/order/draw_stream.h"
#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {
namespace {

// Megatron's _get_num_epochs threshold: the last epoch is shuffled separately when it supplies
// fewer than this share of an epoch's samples.
constexpr double kSeparateFinalEpochThreshold = 0.80;

// The document index before shuffling: arange(begin, end) once per epoch.
void FillEpochs(std::vector<int32_t>& out, int64_t begin, int64_t end, int64_t epochs) {
  size_t at = out.size();
  out.resize(out.size() + static_cast<size_t>((end - begin) * epochs));
  for (int64_t e = 0; e < epochs; ++e) {
    for (int64_t i = begin; i < end; ++i) out[at++] = static_cast<int32_t>(i);
  }
}

// Consumer side of a numpy shuffle of x whose swap targets come from `draws`. (Measured:
// with the targets known, out-of-order loads beat software prefetching here.)
void ApplyShuffle(std::span<int32_t> x, DrawStream& draws) {
  for (size_t i = x.size(); i > 1; --i) std::swap(x[i - 1], x[draws.Pop()]);
}

// Producer side: the same targets numpy's shuffle of n elements draws.
void DrawShuffle(size_t n, NumpyRandomState& rng, DrawStream& draws) {
  // The document index has at most 2^31 - 1 entries, so every draw is a 32-bit one.
  for (size_t i = n; i > 1; --i) draws.Push(rng.Interval32(static_cast<uint32_t>(i - 1)));
}

template <typename T>
void FillAndShuffle(std::vector<T>& out, int64_t begin, int64_t end, NumpyRandomState& rng) {
  const size_t start = out.size();
  out.resize(start + static_cast<size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) {
    out[start + static_cast<size_t>(i - begin)] = static_cast<T>(i);
  }
  rng.Shuffle(std::span<T>(out.data() + start, out.size() - start));
}

}  // namespace

int64_t SampleCount(int64_t num_epochs, int64_t tokens_per_epoch, int64_t seq_length,
                    bool drop_last, bool add_extra_token) {
  const int64_t x = add_extra_token ? 1 : 0;
  const int64_t total = num_epochs * tokens_per_epoch - x;
  if (drop_last) return total / seq_length;
  // Megatron computes this in single precision (helpers.cpp); keep the quirk.
  const float q = static_cast<float>(total) / static_cast<float>(seq_length);
  return static_cast<int64_t>(std::ceil(static_cast<double>(q)));
}

template <typename T>
std::vector<T> BuildSampleIndex(io::LeSpan<int32_t> lengths,
                                const std::vector<int32_t>& document_index, int64_t seq_length,
                                int64_t num_epochs, int64_t tokens_per_epoch, bool drop_last,
                                bool add_extra_token, int64_t first_sequence) {
  const int64_t x = add_extra_token ? 1 : 0;
  const int64_t n =
      SampleCount(num_epochs, tokens_per_epoch, seq_length, drop_last, add_extra_token);
  std::vector<T> out(static_cast<size_t>(2 * (n + 1)));
  const int64_t doc_count = static_cast<int64_t>(document_index.size());
  const int64_t last = doc_count - 1;
  const std::byte* length_bytes = lengths.bytes().data();
  // Lengths are read in document-index order, i.e. at random: prefetch ahead (measured
  // faster here, unlike the swaps).
  constexpr int64_t kAhead = 48;
  auto length_of = [&](int64_t d) {
    return int64_t{lengths[static_cast<size_t>(document_index[d] - first_sequence)]};
  };
  int64_t d = 0, offset = 0;
  out[0] = 0;
  out[1] = 0;
  for (int64_t s = 1; s <= n; ++s) {
    int64_t remaining = seq_length + x;
    while (remaining != 0) {
      if (d + kAhead < doc_count) {
        __builtin_prefetch(length_bytes +
                           4 * static_cast<size_t>(document_index[d + kAhead] - first_sequence));
      }
      const int64_t doc_length = length_of(d) - offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        offset += remaining + doc_length - x;
        remaining = 0;
      } else {
        if (d == last) {
          offset = length_of(d) - x;
          break;
        }
        ++d;
        offset = 0;
      }
    }
    out[2 * s] = static_cast<T>(d);
    out[2 * s + 1] = static_cast<T>(offset);
  }
  return out;
}

template std::vector<int32_t> BuildSampleIndex<int32_t>(io::LeSpan<int32_t>,
                                                        const std::vector<int32_t>&, int64_t,
                                                        int64_t, int64_t, bool, bool, int64_t);
template std::vector<int64_t> BuildSampleIndex<int64_t>(io::LeSpan<int32_t>,
                                                        const std::vector<int32_t>&, int64_t,
                                                        int64_t, int64_t, bool, bool, int64_t);

Result<GptTables> BuildGptTables(io::LeSpan<int32_t> lengths, int64_t begin, int64_t end,
                                 const GptTablesConfig& c, GptTablesTimes* times) {
  if (c.seq_length <= 0) return InvalidArgument("seq_length must be positive");
  if (begin < 0 || end < begin || static_cast<size_t>(end) > lengths.size()) {
    return InvalidArgument("sequence range [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") outside the dataset's " + std::to_string(lengths.size()) +
                           " sequences");
  }
  const int64_t x = c.add_extra_token ? 1 : 0;
  GptTables t;
  int64_t max_length = 0;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t len = lengths[static_cast<size_t>(i)];
    t.num_tokens_per_epoch += len;
    max_length = std::max(max_length, len);
  }
  const int64_t T = t.num_tokens_per_epoch;
  if (c.num_samples) {
    const int64_t need = *c.num_samples * c.seq_length + x;
    if (T == 0 && need > 0) {
      return InvalidArgument("split range [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") has no tokens but " + std::to_string(*c.num_samples) +
                             " samples were asked for (Megatron would loop forever); change "
                             "--split or the sample count");
    }
    t.num_epochs = std::max<int64_t>(1, (need + T - 1) / T);
  } else {
    if (T <= 1) {
      return InvalidArgument("split range [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") has " + std::to_string(T) + " tokens; one epoch needs at least 2");
    }
    t.num_epochs = 1;
  }
  const int64_t E = t.num_epochs;
  t.num_samples_per_epoch = (T - x) / c.seq_length;
  if (E > 1) {
    t.num_samples_sans_final_epoch = ((E - 1) * T - x) / c.seq_length;
    const int64_t from_final = *c.num_samples - t.num_samples_sans_final_epoch;
    const int64_t threshold = static_cast<int64_t>(kSeparateFinalEpochThreshold *
                                                   static_cast<double>(t.num_samples_per_epoch));
    if (from_final < 0 || from_final > t.num_samples_per_epoch + 1) {
      return Internal("separate-final-epoch bounds violated: from_final=" +
                      std::to_string(from_final));
    }
    t.separate_final_epoch = from_final < threshold;
  }
  const int64_t n_seq = end - begin;
  if (n_seq * E > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("document index of " + std::to_string(n_seq * E) +
                           " entries does not fit Megatron's int32 document_index");
  }
  // The sample count follows from the tokens alone, so the shuffle index can be built
  // before (and beside) the sample index.
  const int64_t n = SampleCount(E, T, c.seq_length, c.drop_last, c.add_extra_token);
  const int64_t first = t.separate_final_epoch ? t.num_samples_sans_final_epoch : n;
  t.shuffle_index_is_int64 = n >= int64_t{0xffffffff} - 1;
  t.sample_index_is_int64 =
      std::max<int64_t>(n_seq * E, max_length) > std::numeric_limits<int32_t>::max();

  // Megatron shuffles all epochs of the document index at once, or the final epoch apart.
  const std::vector<int64_t> segments =
      t.separate_final_epoch ? std::vector<int64_t>{E - 1, 1} : std::vector<int64_t>{E};
  FillEpochs(t.document_index, begin, end, E);

  // Drawing thread: every random number in Megatron's order. The document-index targets go
  // through the stream; then it builds the shuffle index itself.
  DrawStream draws;
  double draw_seconds = 0, shuffle_seconds = 0;
  std::thread drawer([&] {
    NumpyRandomState rng(c.seed);
    Stopwatch t0;
    for (int64_t epochs : segments) {
      DrawShuffle(static_cast<size_t>(n_seq * epochs), rng, draws);
    }
    draws.Finish();
    draw_seconds = t0.Seconds();
    t0 = Stopwatch();
    if (t.shuffle_index_is_int64) {
      t.shuffle_index64.reserve(static_cast<size_t>(n));
      FillAndShuffle(t.shuffle_index64, 0, first, rng);
      FillAndShuffle(t.shuffle_index64, first, n, rng);
    } else {
      t.shuffle_index32.reserve(static_cast<size_t>(n));
      FillAndShuffle(t.shuffle_index32, 0, first, rng);
      FillAndShuffle(t.shuffle_index32, first, n, rng);
    }
    shuffle_seconds = t0.Seconds();
  });

  Stopwatch t0;
  size_t at = 0;
  for (int64_t epochs : segments) {
    const size_t len = static_cast<size_t>(n_seq * epochs);
    ApplyShuffle(std::span<int32_t>(t.document_index.data() + at, len), draws);
    at += len;
  }
  const double doc_seconds = t0.Seconds();
  t0 = Stopwatch();
  // The sample index reads lengths at random: from anonymous memory (huge pages) rather than
  // the file mapping, whose 4 KiB pages make every read a TLB miss on large corpora.
  std::vector<int32_t> dense(static_cast<size_t>(n_seq));
  for (int64_t i = begin; i < end; ++i) dense[i - begin] = lengths[static_cast<size_t>(i)];
  const io::LeSpan<int32_t> dense_lengths(reinterpret_cast<const std::byte*>(dense.data()),
                                          dense.size());
  if (t.sample_index_is_int64) {
    t.sample_index64 = BuildSampleIndex<int64_t>(dense_lengths, t.document_index, c.seq_length, E,
                                                 T, c.drop_last, c.add_extra_token, begin);
  } else {
    t.sample_index32 = BuildSampleIndex<int32_t>(dense_lengths, t.document_index, c.seq_length, E,
                                                 T, c.drop_last, c.add_extra_token, begin);
  }
  std::vector<int32_t>().swap(dense);
  const double sample_seconds = t0.Seconds();
  drawer.join();
  if (times) {
    times->document_index = std::max(doc_seconds, draw_seconds);
    times->sample_index = sample_seconds;
    times->shuffle_index = shuffle_seconds;
  }
  return t;
}

}  // namespace gridfeed::order
