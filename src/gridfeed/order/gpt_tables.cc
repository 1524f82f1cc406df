#include "gridfeed/order/gpt_tables.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <latch>
#include <limits>
#include <span>
#include <system_error>
#include <thread>
#include <type_traits>

#include "gridfeed/core/check.h"
#include "gridfeed/core/memory_usage.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/io/thread_scratch.h"
#include "gridfeed/order/draw_stream.h"
#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {
namespace {

// Megatron's _get_num_epochs threshold: the last epoch is shuffled separately when it supplies
// fewer than this share of an epoch's samples.
constexpr double kSeparateFinalEpochThreshold = 0.80;

// The document index before shuffling: arange(begin, end) once per epoch, into `out` (of
// (end - begin) * epochs entries).
void FillEpochs(int64_t begin, int64_t end, int64_t epochs, PageArray<int32_t>& out) {
  const size_t n = static_cast<size_t>(end - begin);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(begin + static_cast<int64_t>(i));
  for (int64_t e = 1; e < epochs; ++e) {
    std::memcpy(out.data() + static_cast<size_t>(e) * n, out.data(), n * sizeof(int32_t));
  }
}

// lengths[begin, end) copied to `out` (anonymous memory on huge pages: the sample index reads
// them at random, and from the file mapping's 4 KiB pages nearly every read would miss the
// TLB). Through `copy` where it can (a descriptor read), else element by element from the span.
void ReadLengths(io::LeSpan<int32_t> lengths, int64_t begin, int64_t end,
                 const GptTablesConfig::CopyLengths& copy, int32_t* out) {
  if (copy && copy(begin, end, out)) return;
  for (int64_t i = 0; i < end - begin; ++i) out[i] = lengths[static_cast<size_t>(begin + i)];
}

// Consumer side of a numpy shuffle of n elements whose swap targets come from `draws`:
// swap(i, target) at positions n - 1 .. 1, each target prefetched ahead (PrefetchedSwaps).
template <typename Swap, typename Prefetch>
void ApplyShuffleWith(size_t n, DrawStream& draws, Swap swap, Prefetch prefetch) {
  if (n < 2) return;
  PrefetchedSwaps<uint32_t>(
      n - 1, [&draws] { return draws.Pop(); }, prefetch,
      [&swap, n](size_t k, uint32_t target) { swap(n - 1 - k, target); });
}

// A swap of (id, length) pairs, x[2 i] and x[2 i + 1], moved as one 8-byte unit.
struct PairSwap {
  int32_t* x;
  void operator()(size_t a, size_t b) const {
    uint64_t u, v;
    std::memcpy(&u, x + 2 * a, 8);
    std::memcpy(&v, x + 2 * b, 8);
    std::memcpy(x + 2 * a, &v, 8);
    std::memcpy(x + 2 * b, &u, 8);
  }
};

// numpy's shuffle of n elements with `rng` on the calling thread: the same targets as a
// SegmentDraws hands to ApplyShuffleWith (a block of draws at a time), applied as drawn.
template <typename Swap>
void ShuffleInline(size_t n, NumpyRandomState& rng, Swap swap) {
  constexpr size_t kBlock = 256;
  uint32_t block[kBlock];
  size_t i = n;
  while (i > 1) {
    const size_t m = std::min(kBlock, i - 1);
    rng.FillIntervals32(static_cast<uint32_t>(i - 1), block, m);
    for (size_t k = 0; k < m; ++k) swap(i - 1 - k, block[k]);
    i -= m;
  }
}

// Producer side: the targets numpy's shuffles of the document index's segments (each of
// fewer than 2^32 elements) draw, a chunk at a time into `draws`.
class SegmentDraws {
 public:
  SegmentDraws(std::span<const size_t> sizes, uint32_t seed) : sizes_(sizes), rng_(seed) {
    i_ = sizes_.empty() ? 0 : sizes_[0];
  }
  bool done() const { return segment_ >= sizes_.size(); }
  // The next `count` targets (fewer at the end) into `draws`.
  void Push(DrawStream& draws, size_t count) {
    Draw(count, [&draws](const uint32_t* block, size_t n) { draws.PushBlock(block, n); });
  }
  // The same draws, dropped (`count` at most); the generator is then where the shuffles leave it.
  void Skip(size_t count) {
    Draw(count, [](const uint32_t*, size_t) {});
  }
  NumpyRandomState& rng() { return rng_; }

 private:
  // The next `count` targets (fewer at the end), a block at a time to `use(block, n)`.
  template <typename Use>
  void Draw(size_t count, Use use) {
    constexpr size_t kBlock = 256;
    uint32_t block[kBlock];
    while (count > 0 && !done()) {
      if (i_ <= 1) {
        i_ = ++segment_ < sizes_.size() ? sizes_[segment_] : 0;
        continue;
      }
      const size_t n = std::min({kBlock, i_ - 1, count});
      rng_.FillIntervals32(static_cast<uint32_t>(i_ - 1), block, n);
      use(block, n);
      i_ -= n;
      count -= n;
    }
  }

  std::span<const size_t> sizes_;
  size_t segment_ = 0;
  size_t i_ = 0;  // the shuffle of segment_ is at position i_ (done at <= 1)
  NumpyRandomState rng_;
};

// arange(begin, end) into out[begin, end).
template <typename T>
void Iota(PageArray<T>& out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[static_cast<size_t>(i)] = static_cast<T>(i);
}

// Megatron's build_sample_idx (helpers.cpp): n samples of seq_length (+ x) tokens as
// [n + 1, 2] rows (position in the document index, offset), over doc_count positions whose
// lengths `length_of(d)` gives; `prefetch(d)` is told a few dozen positions ahead. `out` holds
// 2 (n + 1) entries.
//
// Megatron walks sample by sample; this walks position by position, which needs no branch
// on most documents (Megatron's mispredicts about once a sample: 146.5M documents, 0.8 s).
// Row s >= 1 begins at token s S of the epochs' stream: in the position whose tokens
// [P, P + L) satisfy P < s S + x <= P + L, at offset s S - P. A row whose s S + x lies past
// the last token (no drop_last) stays where Megatron's walk runs out: the last position, at
// its length - x. properties_test compares this with Megatron's loop. `passed(d)` is told,
// every `pass_every` positions (a power of two), that the walk is done with those before d.
struct NothingPassed {
  void operator()(int64_t) const {}
};
template <typename T, typename LengthOf, typename Prefetch, typename Passed = NothingPassed>
void WalkSamples(int64_t doc_count, LengthOf length_of, Prefetch prefetch, int64_t seq_length,
                 int64_t n, bool add_extra_token, PageArray<T>& out, Passed passed = {},
                 int64_t pass_every = int64_t{1} << 20) {
  GRIDFEED_CHECK(doc_count > 0 || n == 0);  // samples need a document (Megatron reads one)
  const int64_t x = add_extra_token ? 1 : 0;
  constexpr int64_t kAhead = 48;
  T* const rows = out.data();
  rows[0] = 0;
  rows[1] = 0;
  int64_t s = 1;                   // the next row
  int64_t bound = seq_length + x;  // s S + x
  int64_t begin = 0;               // P: the tokens before position d
  for (int64_t d = 0; d < doc_count && s <= n; ++d) {
    if (d + kAhead < doc_count) prefetch(d + kAhead);
    if ((d & (pass_every - 1)) == 0 && d > 0) passed(d);
    const int64_t end = begin + length_of(d);
    // Row s is written here whether or not it begins in this document; kept only if it does.
    rows[2 * s] = static_cast<T>(d);
    rows[2 * s + 1] = static_cast<T>(bound - x - begin);
    // here = (bound <= end) as arithmetic: compilers turn the comparison into the branch
    // this avoids.
    const int64_t here = 1 + ((end - bound) >> 63);
    s += here;
    bound += seq_length & -here;
    for (; bound <= end && s <= n; ++s, bound += seq_length) {  // a document of > S tokens
      rows[2 * s] = static_cast<T>(d);
      rows[2 * s + 1] = static_cast<T>(bound - x - begin);
    }
    begin = end;
  }
  if (s <= n && doc_count > 0) {
    const int64_t last = doc_count - 1, offset = length_of(last) - x;
    for (; s <= n; ++s) {
      rows[2 * s] = static_cast<T>(last);
      rows[2 * s + 1] = static_cast<T>(offset);
    }
  }
}

// WalkSamples where the length at position d is lengths[document_index[d] - first]: those
// reads go in document-index order, i.e. at random, so they are prefetched.
template <typename T>
void WalkSampleIndex(std::span<const int32_t> document_index, const int32_t* lengths, int64_t first,
                     int64_t seq_length, int64_t n, bool add_extra_token, PageArray<T>& out) {
  const int32_t* at = lengths - first;
  WalkSamples<T>(
      static_cast<int64_t>(document_index.size()),
      [&](int64_t d) { return int64_t{at[document_index[static_cast<size_t>(d)]]}; },
      [&](int64_t d) { __builtin_prefetch(at + document_index[static_cast<size_t>(d)]); },
      seq_length, n, add_extra_token, out);
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
PageArray<T> BuildSampleIndex(io::LeSpan<int32_t> lengths, std::span<const int32_t> document_index,
                              int64_t seq_length, int64_t num_epochs, int64_t tokens_per_epoch,
                              bool drop_last, bool add_extra_token) {
  PageArray<int32_t> dense(lengths.size());
  ReadLengths(lengths, 0, static_cast<int64_t>(lengths.size()), {}, dense.data());
  const int64_t n =
      SampleCount(num_epochs, tokens_per_epoch, seq_length, drop_last, add_extra_token);
  PageArray<T> out(static_cast<size_t>(2 * (n + 1)));
  WalkSampleIndex<T>(document_index, dense.data(), 0, seq_length, n, add_extra_token, out);
  return out;
}

template PageArray<int32_t> BuildSampleIndex<int32_t>(io::LeSpan<int32_t>, std::span<const int32_t>,
                                                      int64_t, int64_t, int64_t, bool, bool);
template PageArray<int64_t> BuildSampleIndex<int64_t>(io::LeSpan<int32_t>, std::span<const int32_t>,
                                                      int64_t, int64_t, int64_t, bool, bool);

Result<GptTables> BuildGptTables(io::LeSpan<int32_t> lengths, int64_t begin, int64_t end,
                                 const GptTablesConfig& c, GptTablesTimes* times) {
  if (c.seq_length <= 0) return InvalidArgument("seq_length must be positive");
  if (c.testing_pass_every < 0 || (c.testing_pass_every & (c.testing_pass_every - 1)) != 0) {
    return InvalidArgument("testing_pass_every must be a power of two");
  }
  if (begin < 0 || end < begin || static_cast<size_t>(end) > lengths.size()) {
    return InvalidArgument("sequence range [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") outside the dataset's " + std::to_string(lengths.size()) +
                           " sequences");
  }
  const int64_t x = c.add_extra_token ? 1 : 0;
  GptTables t;
  Stopwatch t0;
  // The split's lengths go to the upper half of a buffer of twice their count; its lower half
  // is touched only with one epoch, where the shuffle moves (id, length) pairs (see below).
  const int64_t n_seq = end - begin;
  // A small build (one thread, below two_threads_from) takes it from the thread's scratch
  // instead, kept across builds: a blend of 1,000 datasets otherwise faulted in, and unmapped
  // again, 8 bytes per document of fresh pages (47.7M documents: 381 MB) with a TLB shootdown
  // per dataset. A large build owns its buffer, and gives its pages back as it goes.
  const bool scratch = n_seq < std::min<int64_t>(c.two_threads_from, int64_t{1} << 20);  // <= 8 MB
  PageArray<int32_t> buffer;
  int32_t* lower = nullptr;
  if (scratch) {
    lower =
        io::ThreadScratchOf<int32_t>(io::ScratchSlot::kTablePairs, static_cast<size_t>(2 * n_seq))
            .data();
  } else {
    buffer = PageArray<int32_t>(static_cast<size_t>(2 * n_seq));
    lower = buffer.data();
  }
  int32_t* const dense = lower + n_seq;
  // While the lengths are read, another thread faults in the lower half, which one epoch (the
  // usual large build) fills with the pairs next: a fresh page costs the kernel a zeroing, and
  // on a virtual machine a fault in the host as well (146.5M documents: the pairs' 586 MB took
  // 1 s of the build on one thread). Stopped and given back if the build has several epochs;
  // stopped once the pairs are written otherwise (it must not fault back pages the walk
  // gives back). `faulted`: bytes it has faulted in, which the memory check below counts.
  std::atomic<bool> stop_faulting{false};
  std::atomic<size_t> faulted{0};
  std::thread faulting;
  if (n_seq > 0 && n_seq >= c.two_threads_from) {
    try {
      faulting = std::thread(
          [lower = reinterpret_cast<std::byte*>(lower), n_seq, &stop_faulting, &faulted] {
            constexpr size_t kStep = size_t{8} << 20;  // stops within a few ms when told
            const size_t bytes = static_cast<size_t>(n_seq) * sizeof(int32_t);
            for (size_t at = 0; at < bytes && !stop_faulting.load(std::memory_order_relaxed);
                 at += kStep) {
              const size_t step = std::min(kStep, bytes - at);
              if (!PopulateForWrite(lower + at, step)) return;  // not supported: the pairs fault
              faulted.fetch_add(step, std::memory_order_relaxed);
            }
          });
    } catch (const std::exception&) {  // no thread: the pairs fault their pages themselves
    }
  }
  // Stopped and joined on every return (it faults pages of `buffer`, declared before it).
  // Faulting a page already written is a no-op, so it may run on beside the pairs' writes.
  struct JoinOnExit {
    std::thread& t;
    std::atomic<bool>& stop;
    ~JoinOnExit() {
      stop.store(true, std::memory_order_relaxed);
      if (t.joinable()) t.join();
    }
  } join_faulting{faulting, stop_faulting};
  ReadLengths(lengths, begin, end, c.copy_lengths, dense);
  if (c.lengths_read) c.lengths_read();
  int64_t max_length = 0, min_length = 0;
  for (int64_t i = 0; i < n_seq; ++i) {
    const int64_t len = dense[i];
    t.num_tokens_per_epoch += len;
    max_length = std::max(max_length, len);
    min_length = std::min(min_length, len);
  }
  // Lengths not checked yet (a check beside the build reports the file): nothing is sized from
  // impossible ones.
  if (min_length < 0) {
    return InvalidArgument("sequence range [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") holds a negative length (" + std::to_string(min_length) + ")");
  }
  if (c.max_tokens && t.num_tokens_per_epoch > *c.max_tokens) {
    return InvalidArgument("sequence range [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") holds " + std::to_string(t.num_tokens_per_epoch) +
                           " tokens, more than its store's " + std::to_string(*c.max_tokens));
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
    // Megatron's loop stops at the first epoch count covering `need`: 1 when nothing is needed.
    t.num_epochs = T == 0 ? 1 : std::max<int64_t>(1, (need + T - 1) / T);
  } else {
    if (T <= 1) {
      return InvalidArgument("split range [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") has " + std::to_string(T) + " tokens; one epoch needs at least 2");
    }
    t.num_epochs = 1;
  }
  const int64_t E = t.num_epochs;
  if (E != 1 && faulting.joinable()) {  // no pairs: the lower half goes back
    stop_faulting.store(true, std::memory_order_relaxed);
    faulting.join();
    buffer.ReleaseFront(static_cast<size_t>(n_seq));
  }
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
  if (n_seq * E > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("document index of " + std::to_string(n_seq * E) +
                           " entries does not fit Megatron's int32 document_index");
  }
  // The sample count follows from the tokens alone, so the shuffle index can be built
  // before (and beside) the sample index.
  const int64_t n = SampleCount(E, T, c.seq_length, c.drop_last, c.add_extra_token);
  const int64_t first = t.separate_final_epoch ? t.num_samples_sans_final_epoch : n;
  if (first > n) {  // Megatron would shuffle past its array's end
    return Internal("the shuffle index's first part (" + std::to_string(first) +
                    " samples) exceeds its " + std::to_string(n) + " samples");
  }
  t.shuffle_index_is_int64 = n >= int64_t{0xffffffff} - 1;
  t.sample_index_is_int64 =
      std::max<int64_t>(n_seq * E, max_length) > std::numeric_limits<int32_t>::max();
  {
    // The tables still to fault in (one epoch: the pairs' half of `buffer`, less what the
    // faulting thread has done, then the document index and the sample index, in pages the
    // pairs give back as the walk passes them).
    const double entries = static_cast<double>(n + 1);
    const double pairs_left = 4.0 * static_cast<double>(n_seq) -
                              static_cast<double>(faulted.load(std::memory_order_relaxed));
    const double bytes = (E == 1 ? pairs_left : 4.0 * static_cast<double>(n_seq * E)) +
                         entries * (t.sample_index_is_int64 ? 16 : 8) +
                         entries * (t.shuffle_index_is_int64 ? 8 : 4);
    GRIDFEED_RETURN_IF_ERROR(CheckMemoryFor(
        bytes,
        "building the tables of " + std::to_string(n) + " samples (" + std::to_string(E) +
            " epochs of " + std::to_string(n_seq) + " documents)",
        "; ask for fewer samples or use a machine with more memory"));
  }

  // Megatron shuffles all epochs of the document index at once, or the final epoch apart: the
  // segments' sizes, in entries.
  const auto entries = [n_seq](int64_t epochs) { return static_cast<size_t>(n_seq * epochs); };
  const std::vector<size_t> segments = t.separate_final_epoch
                                           ? std::vector<size_t>{entries(E - 1), entries(1)}
                                           : std::vector<size_t>{entries(E)};

  // Everything is allocated here, before the drawer starts: past that point nothing on this
  // thread may throw (the drawer could be waiting on it, and a joinable thread terminates).
  if (t.sample_index_is_int64) {
    t.sample_index64 = PageArray<int64_t>(static_cast<size_t>(2 * (n + 1)));
  } else {
    t.sample_index32 = PageArray<int32_t>(static_cast<size_t>(2 * (n + 1)));
  }
  if (t.shuffle_index_is_int64) {
    t.shuffle_index64 = PageArray<int64_t>(static_cast<size_t>(n));
  } else {
    t.shuffle_index32 = PageArray<uint32_t>(static_cast<size_t>(n));
  }
  t.document_index = PageArray<int32_t>(static_cast<size_t>(n_seq * E));
  // Drawing thread: every random number in Megatron's order. The document-index swap targets
  // go through the stream to the calling thread, which applies them and builds the sample
  // index. The shuffle index's draws follow them in Megatron's one RandomState, but its length
  // follows from the tokens alone: a second generator skips past the document index's draws
  // and shuffles it whenever the stream is full, so this thread's spare time goes to it
  // rather than to waiting for the applier. Below two_threads_from entries the calling thread
  // draws and applies alone, then shuffles the shuffle index (one RandomState).
  const bool two_threads = n_seq * E >= c.two_threads_from;
  std::optional<DrawStream> draws;
  if (two_threads) {
    draws.emplace(c.testing_draw_chunk > 0 ? c.testing_draw_chunk : DrawStream::kDefaultChunk);
  }
  std::optional<NumpyRandomState> rng;
  if (!two_threads) rng.emplace(c.seed);
  std::latch pages_ready(1);
  double shuffle_seconds = 0;
  // The sample and shuffle indexes' pages, on the drawing thread while the other one fills.
  // With one epoch the sample index is faulted in as the walk gives back the (id, length)
  // pairs' pages instead, so that the pairs and the tables are not all held at once.
  auto prepare_pages = [&] {
    if (E != 1 && t.sample_index_is_int64) {
      t.sample_index64.Populate();
    } else if (E != 1) {
      t.sample_index32.Populate();
    }
    if (t.shuffle_index_is_int64) {
      Iota(t.shuffle_index64, 0, n);
    } else {
      Iota(t.shuffle_index32, 0, n);
    }
    pages_ready.count_down();
  };
  auto draw = [&] {
    SegmentDraws doc(segments, c.seed), ahead(segments, c.seed);
    // The shuffle index's two parts (Megatron's [0, first) and [first, n)), at position `at`.
    size_t part = 0, at = static_cast<size_t>(first);
    auto shuffle_some = [&](auto& x, size_t swaps) {
      using T = std::remove_cvref_t<decltype(x[0])>;
      const std::span<T> parts[2] = {
          std::span<T>(x.data(), static_cast<size_t>(first)),
          std::span<T>(x.data() + first, static_cast<size_t>(n - first))};
      while (part < 2 && swaps > 0) {
        const size_t before = at;
        ahead.rng().ShuffleSome(parts[part], at, swaps);
        swaps -= std::min(swaps, before - at);
        if (at <= 1) at = ++part < 2 ? parts[part].size() : 0;
      }
    };
    // One slice of the side work: at most `count` skipped draws or shuffle-index swaps.
    auto side = [&](size_t count) {
      Stopwatch watch;
      if (!ahead.done()) {
        ahead.Skip(count);
      } else if (t.shuffle_index_is_int64) {
        shuffle_some(t.shuffle_index64, count);
      } else {
        shuffle_some(t.shuffle_index32, count);
      }
      shuffle_seconds += watch.Seconds();
    };
    auto side_done = [&] { return ahead.done() && part >= 2; };
    // From here this thread mostly waits on the applier (a full stream): told once.
    bool told_idle = false;
    auto tell_idle = [&] {
      if (told_idle) return;
      told_idle = true;
      if (c.table_final) c.table_final(GptTable::kShuffleIndex, t, /*read_after=*/false);
      if (c.drawer_idle) c.drawer_idle();
    };
    constexpr size_t kSlice = 4096;  // about 50 us of swaps: the stream holds ms of draws
    while (!doc.done()) {
      if (draws->CanPushChunk() || side_done()) {
        if (side_done()) tell_idle();
        doc.Push(*draws, draws->chunk());  // waits while the stream is full
      } else {
        side(kSlice);
      }
    }
    draws->Finish();
    if (!ahead.done()) ahead = doc;  // still skipping: `doc` is where the skip would end
    while (!side_done()) side(size_t{1} << 20);
    tell_idle();
  };
  std::thread drawer;
  if (two_threads) {
    drawer = std::thread([&] {
      prepare_pages();
      draw();
    });
  } else {
    prepare_pages();
  }
  // The document index's swaps of `count` elements: from the stream, or drawn here.
  auto shuffle_doc = [&](size_t count, auto swap, auto prefetch) {
    if (two_threads) {
      ApplyShuffleWith(count, *draws, swap, prefetch);
    } else {
      ShuffleInline(count, *rng, swap);
    }
  };

  double doc_seconds = 0;
  if (E == 1) {
    // One epoch: the shuffle moves (id, length) pairs, so the sample index reads the lengths
    // in order rather than one at random per document (146.5M documents: 1.5 s less). The
    // walk then copies the ids out to the document index a block of positions behind it and
    // gives the pairs' pages back, so the pairs are never held beside all the tables
    // (146.5M documents: 1.17 GB of pairs, 1.46 GB of tables). A length is read before its
    // pair is written: pair i covers lengths up to i, already read.
    int32_t* const pairs = lower;
    for (int64_t i = 0; i < n_seq; ++i) {
      const int32_t len = dense[i];
      pairs[2 * i] = static_cast<int32_t>(begin + i);
      pairs[2 * i + 1] = len;
    }
    // Every lower-half page is written: the faulting thread has nothing left to do, and must
    // not fault back the pages the walk gives back.
    stop_faulting.store(true, std::memory_order_relaxed);
    if (faulting.joinable()) faulting.join();
    shuffle_doc(static_cast<size_t>(n_seq), PairSwap{pairs},
                [pairs](size_t t) { __builtin_prefetch(pairs + 2 * t, 1); });
    doc_seconds = t0.Seconds();
    t0 = Stopwatch();
    pages_ready.wait();
    int32_t* const ids = t.document_index.data();
    int64_t copied = 0;  // ids[0, copied) are written, and the pairs' pages before them given back
    auto copy_ids = [&](int64_t to) {
      for (int64_t d = copied; d < to; ++d) ids[d] = pairs[2 * d];
      if (!scratch) buffer.ReleaseFront(static_cast<size_t>(2 * to));
      copied = to;
    };
    auto walk = [&](auto& out) {
      using Out = std::remove_cvref_t<decltype(out[0])>;
      WalkSamples<Out>(
          n_seq, [pairs](int64_t d) { return int64_t{pairs[2 * d + 1]}; }, [](int64_t) {},
          c.seq_length, n, c.add_extra_token, out, copy_ids,
          c.testing_pass_every > 0 ? c.testing_pass_every : int64_t{1} << 20);
    };
    if (t.sample_index_is_int64) {
      walk(t.sample_index64);
    } else {
      walk(t.sample_index32);
    }
    copy_ids(n_seq);  // the walk stops once it has its samples
    if (two_threads && c.table_final) {
      c.table_final(GptTable::kDocumentIndex, t, /*read_after=*/false);
      c.table_final(GptTable::kSampleIndex, t, /*read_after=*/false);
    }
    buffer = PageArray<int32_t>();
  } else {
    FillEpochs(begin, end, E, t.document_index);
    size_t at = 0;
    for (const size_t len : segments) {
      int32_t* const x = t.document_index.data() + at;
      shuffle_doc(
          len, [x](size_t a, size_t b) { std::swap(x[a], x[b]); },
          [x](size_t t) { __builtin_prefetch(x + t, 1); });
      at += len;
    }
    doc_seconds = t0.Seconds();
    t0 = Stopwatch();
    if (two_threads && c.table_final) {
      c.table_final(GptTable::kDocumentIndex, t, /*read_after=*/true);
    }
    pages_ready.wait();
    if (t.sample_index_is_int64) {
      WalkSampleIndex<int64_t>(t.document_index, dense, begin, c.seq_length, n, c.add_extra_token,
                               t.sample_index64);
    } else {
      WalkSampleIndex<int32_t>(t.document_index, dense, begin, c.seq_length, n, c.add_extra_token,
                               t.sample_index32);
    }
    if (two_threads && c.table_final) {
      c.table_final(GptTable::kSampleIndex, t, /*read_after=*/false);
    }
    buffer = PageArray<int32_t>();
  }
  const double sample_seconds = t0.Seconds();
  if (two_threads) {
    drawer.join();
  } else {
    Stopwatch watch;  // the shuffle index's two parts, after the document index's draws
    auto shuffle_parts = [&](auto& x) {
      using T = std::remove_cvref_t<decltype(x[0])>;
      rng->Shuffle(std::span<T>(x.data(), static_cast<size_t>(first)));
      rng->Shuffle(std::span<T>(x.data() + first, static_cast<size_t>(n - first)));
    };
    if (t.shuffle_index_is_int64) {
      shuffle_parts(t.shuffle_index64);
    } else {
      shuffle_parts(t.shuffle_index32);
    }
    shuffle_seconds = watch.Seconds();
  }
  if (times) {
    times->document_index = doc_seconds;
    times->sample_index = sample_seconds;
    times->shuffle_index = shuffle_seconds;
  }
  return t;
}

}  // namespace gridfeed::order
