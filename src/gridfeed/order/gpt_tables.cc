#include "gridfeed/order/gpt_tables.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>

#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// arange(begin, end) repeated `epochs` times, shuffled once as a whole.
void AppendShuffledEpochs(std::vector<int32_t>& out, int64_t begin, int64_t end, int64_t epochs,
                          NumpyRandomState& rng) {
  const size_t start = out.size();
  for (int64_t e = 0; e < epochs; ++e) {
    for (int64_t i = begin; i < end; ++i) out.push_back(static_cast<int32_t>(i));
  }
  rng.Shuffle(std::span<int32_t>(out.data() + start, out.size() - start));
}

template <typename T>
void AppendShuffledRange(std::vector<T>& out, int64_t begin, int64_t end, NumpyRandomState& rng) {
  const size_t start = out.size();
  for (int64_t i = begin; i < end; ++i) out.push_back(static_cast<T>(i));
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
std::vector<T> BuildSampleIndex(const std::function<int32_t(int64_t)>& lengths,
                                const std::vector<int32_t>& document_index, int64_t seq_length,
                                int64_t num_epochs, int64_t tokens_per_epoch, bool drop_last,
                                bool add_extra_token) {
  const int64_t x = add_extra_token ? 1 : 0;
  const int64_t n =
      SampleCount(num_epochs, tokens_per_epoch, seq_length, drop_last, add_extra_token);
  std::vector<T> out(static_cast<size_t>(2 * (n + 1)));
  const int64_t last = static_cast<int64_t>(document_index.size()) - 1;
  int64_t d = 0, offset = 0;
  out[0] = 0;
  out[1] = 0;
  for (int64_t s = 1; s <= n; ++s) {
    int64_t remaining = seq_length + x;
    while (remaining != 0) {
      const int64_t doc_length = lengths(document_index[d]) - offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        offset += remaining + doc_length - x;
        remaining = 0;
      } else {
        if (d == last) {
          offset = lengths(document_index[d]) - x;
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

template std::vector<int32_t> BuildSampleIndex<int32_t>(const std::function<int32_t(int64_t)>&,
                                                        const std::vector<int32_t>&, int64_t,
                                                        int64_t, int64_t, bool, bool);
template std::vector<int64_t> BuildSampleIndex<int64_t>(const std::function<int32_t(int64_t)>&,
                                                        const std::vector<int32_t>&, int64_t,
                                                        int64_t, int64_t, bool, bool);

Result<GptTables> BuildGptTables(const std::function<int32_t(int64_t)>& lengths, int64_t begin,
                                 int64_t end, const GptTablesConfig& c, GptTablesTimes* times) {
  if (c.seq_length <= 0) return InvalidArgument("seq_length must be positive");
  const int64_t x = c.add_extra_token ? 1 : 0;
  GptTables t;
  int64_t max_length = 0;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t len = lengths(i);
    t.num_tokens_per_epoch += len;
    max_length = std::max(max_length, len);
  }
  const int64_t T = t.num_tokens_per_epoch;
  if (c.num_samples) {
    if (T == 0 && *c.num_samples * c.seq_length + x > 0) {
      return InvalidArgument("split range [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") has no tokens but " + std::to_string(*c.num_samples) +
                             " samples were asked for (Megatron would loop forever); change "
                             "--split or the sample count");
    }
    const int64_t need = *c.num_samples * c.seq_length + x;
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
    const int64_t threshold =
        static_cast<int64_t>(0.80 * static_cast<double>(t.num_samples_per_epoch));
    if (from_final < 0 || from_final > t.num_samples_per_epoch + 1) {
      return Internal("separate-final-epoch bounds violated: from_final=" +
                      std::to_string(from_final));
    }
    t.separate_final_epoch = from_final < threshold;
  }

  NumpyRandomState rng(c.seed);
  auto t0 = Clock::now();
  const int64_t n_seq = end - begin;
  t.document_index.reserve(static_cast<size_t>(n_seq * E));
  if (!t.separate_final_epoch) {
    AppendShuffledEpochs(t.document_index, begin, end, E, rng);
  } else {
    AppendShuffledEpochs(t.document_index, begin, end, E - 1, rng);
    AppendShuffledEpochs(t.document_index, begin, end, 1, rng);
  }
  if (times) times->document_index = Since(t0);

  t0 = Clock::now();
  const int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  t.sample_index_is_int64 =
      std::max<int64_t>(static_cast<int64_t>(t.document_index.size()), max_length) > kInt32Max;
  int64_t n;
  if (t.sample_index_is_int64) {
    t.sample_index64 = BuildSampleIndex<int64_t>(lengths, t.document_index, c.seq_length, E, T,
                                                 c.drop_last, c.add_extra_token);
    n = static_cast<int64_t>(t.sample_index64.size() / 2) - 1;
  } else {
    t.sample_index32 = BuildSampleIndex<int32_t>(lengths, t.document_index, c.seq_length, E, T,
                                                 c.drop_last, c.add_extra_token);
    n = static_cast<int64_t>(t.sample_index32.size() / 2) - 1;
  }
  if (times) times->sample_index = Since(t0);

  t0 = Clock::now();
  const int64_t first = t.separate_final_epoch ? t.num_samples_sans_final_epoch : n;
  t.shuffle_index_is_int64 = n >= int64_t{0xffffffff} - 1;
  if (t.shuffle_index_is_int64) {
    t.shuffle_index64.reserve(static_cast<size_t>(n));
    AppendShuffledRange(t.shuffle_index64, 0, first, rng);
    AppendShuffledRange(t.shuffle_index64, first, n, rng);
  } else {
    t.shuffle_index32.reserve(static_cast<size_t>(n));
    AppendShuffledRange(t.shuffle_index32, 0, first, rng);
    AppendShuffledRange(t.shuffle_index32, first, n, rng);
  }
  if (times) times->shuffle_index = Since(t0);
  return t;
}

}  // namespace gridfeed::order
