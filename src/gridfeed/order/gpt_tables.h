// The index tables of one Megatron GPTDataset (one prefix, one split): document_index,
// sample_index and shuffle_index, bit-identical to Megatron-Core, with their dtypes.
// Pure: the caller passes the sequence lengths (from the token store). Thread safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "gridfeed/core/check.h"
#include "gridfeed/core/page_array.h"
#include "gridfeed/core/status.h"
#include "gridfeed/io/le_span.h"

namespace gridfeed::order {

struct GptTables;
enum class GptTable { kDocumentIndex, kSampleIndex, kShuffleIndex };
inline constexpr GptTable kGptTables[] = {GptTable::kDocumentIndex, GptTable::kSampleIndex,
                                          GptTable::kShuffleIndex};

struct GptTablesConfig {
  int64_t seq_length = 0;
  uint32_t seed = 0;
  bool add_extra_token = true;  // x = 1: consecutive samples share one token
  bool drop_last = true;  // false only for valid with drop_last_partial_validation_sequence off
  std::optional<int64_t> num_samples;  // none = exactly one epoch
  // Called once the build has made its own copy of the lengths (the caller may drop the pages
  // of a mapped index). May run on another thread than the caller's.
  std::function<void()> lengths_read;
  // If set: called once, on the drawing thread, when its own work is done (its side work
  // finished, its draws at most a full stream ahead of the applier); its core then mostly
  // idles until the build ends, so work waiting for a core can start. Not called where the
  // build draws on the calling thread alone.
  std::function<void()> drawer_idle;
  // If set: told once of each table as soon as it is final (the shuffle index on the drawing
  // thread, the others on the calling thread), while the build goes on, so that a writer can
  // copy it out beside the rest (the disk writes the document index back during the walk).
  // Only where the build has two threads, and only once nothing can fail: the build then
  // returns `tables`, with each table's entries unchanged at the same address (a PageArray's
  // memory does not move with it). `read_after`: the build still reads the table (the walk
  // reads a document index of several epochs); its pages must stay. Of `tables` it may read
  // that table and the sizes and flags (the build writes no table object after it allocates).
  std::function<void(GptTable table, const GptTables& tables, bool read_after)> table_final;
  // If set, copies lengths[begin, end) into `out` faster than element by element through the
  // span (io::IndexedDataset::CopySequenceLengths); false: not done, the span is read.
  using CopyLengths = std::function<bool(int64_t begin, int64_t end, int32_t* out)>;
  CopyLengths copy_lengths;
  // If set: the most tokens the range can hold (its store's own count, from the index's last
  // pointer and the .bin size). Lengths summing to more are refused before anything is sized
  // from them: lengths the index check has not passed yet (it runs beside the build).
  std::optional<int64_t> max_tokens;
  // Document-index entries (all epochs) from which the draws get a thread of their own (below:
  // the calling thread draws, applies and shuffles alone, with no stream: a blend of many small
  // datasets builds several at once, one per thread of its pool). Tests set 0 or a maximum.
  int64_t two_threads_from = int64_t{1} << 20;
  // Tests: targets per chunk of the stream to the applier (a power of two; 0: 16,384), small
  // so that the stream fills and the drawing thread's side work runs on small inputs.
  size_t testing_draw_chunk = 0;
  // Tests: with one epoch, positions the sample-index walk passes between copying the ids out
  // and giving back the pairs' pages (a power of two; 0: 2^20), small so small inputs do it.
  int64_t testing_pass_every = 0;
};

// A read-only view of one dataset's tables, wherever they live (a GptTables, or a table image
// in a node-shared window). Valid as long as the viewed memory.
struct GptTablesView {
  std::span<const int32_t> document_index;
  std::span<const int32_t> sample_index32;  // exactly one of the two is non-empty
  std::span<const int64_t> sample_index64;
  std::span<const uint32_t> shuffle_index32;  // exactly one of the two is used
  std::span<const int64_t> shuffle_index64;
  bool shuffle_index_is_int64 = false;
  // A node image's samples (node_image.h) instead of a sample and a shuffle index: sample m
  // starts in document_index[first_doc(m)] at start_offset[m] and ends in
  // document_index[first_doc(m + 1) - 1] at end_offset[m]; its rows are 2m and 2m + 1.
  bool held = false;
  std::span<const int32_t> held_first_doc32;  // [samples + 1]; exactly one of the two is used
  std::span<const int64_t> held_first_doc64;
  std::span<const int32_t> held_start_offset, held_end_offset;

  int64_t num_samples() const {
    if (held) return static_cast<int64_t>(held_start_offset.size());
    return static_cast<int64_t>(shuffle_index_is_int64 ? shuffle_index64.size()
                                                       : shuffle_index32.size());
  }
  int64_t ShuffleAt(int64_t i) const {
    if (held) return 2 * i;
    return shuffle_index_is_int64 ? shuffle_index64[i] : int64_t{shuffle_index32[i]};
  }
  int64_t SampleDoc(int64_t row) const {
    if (held) return row % 2 == 0 ? HeldFirstDoc(row / 2) : HeldFirstDoc(row / 2 + 1) - 1;
    return sample_index64.empty() ? sample_index32[2 * row] : sample_index64[2 * row];
  }
  int64_t SampleOffset(int64_t row) const {
    if (held) return row % 2 == 0 ? held_start_offset[row / 2] : held_end_offset[row / 2];
    return sample_index64.empty() ? sample_index32[2 * row + 1] : sample_index64[2 * row + 1];
  }
  int64_t HeldFirstDoc(int64_t m) const {
    return held_first_doc64.empty() ? held_first_doc32[m] : held_first_doc64[m];
  }
};

struct GptTables {
  int64_t num_tokens_per_epoch = 0;
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  int64_t num_samples_per_epoch = 0;         // (T - x) // S
  int64_t num_samples_sans_final_epoch = 0;  // ((E-1) T - x) // S, when E > 1
  PageArray<int32_t> document_index;
  // [N + 1, 2] rows (position in document_index, offset); exactly one of the two is used.
  bool sample_index_is_int64 = false;
  PageArray<int32_t> sample_index32;
  PageArray<int64_t> sample_index64;
  // [N]; uint32 unless N >= 2^32 - 2.
  bool shuffle_index_is_int64 = false;
  PageArray<uint32_t> shuffle_index32;
  PageArray<int64_t> shuffle_index64;
  // The arrays' pages were given back once written to files (DatasetConfig::on_mid_built):
  // their sizes (num_samples) hold, their entries read as zeros. Whatever would read the
  // entries refuses such tables.
  bool contents_released = false;

  GptTablesView View() const {
    GRIDFEED_CHECK(!contents_released);  // a reader of zeros, not of the tables
    GptTablesView v;
    v.document_index = document_index;
    v.sample_index32 = sample_index32;
    v.sample_index64 = sample_index64;
    v.shuffle_index32 = shuffle_index32;
    v.shuffle_index64 = shuffle_index64;
    v.shuffle_index_is_int64 = shuffle_index_is_int64;
    return v;
  }
  int64_t num_samples() const {  // also of released tables
    return static_cast<int64_t>(shuffle_index_is_int64 ? shuffle_index64.size()
                                                       : shuffle_index32.size());
  }
  int64_t ShuffleAt(int64_t i) const { return View().ShuffleAt(i); }
  int64_t SampleDoc(int64_t row) const { return View().SampleDoc(row); }
  int64_t SampleOffset(int64_t row) const { return View().SampleOffset(row); }
};

// Phase times of one build, in seconds; shuffle_index is the drawing thread's time on the
// shuffle index (skipping the document index's draws included), beside the document index.
struct GptTablesTimes {
  double document_index = 0, sample_index = 0, shuffle_index = 0;
};

// `lengths[i]` is the length of sequence i of the whole low-level dataset; the split uses
// sequence ids [begin, end). InvalidArgument when the split has no tokens but samples are
// asked for (Megatron would loop forever).
//
// From config.two_threads_from document-index entries (below: the calling thread alone, in the
// same order) it uses two threads: one draws the document-index swap targets in Megatron's order
// and hands them to the other, which applies them and builds the sample index; whenever the
// hand-over is full, the first also skips a second generator past those draws and shuffles the
// shuffle index with it (its length follows from the token count alone). From as many
// documents, a third thread faults in the pairs' memory (below) while the lengths are read,
// until the pairs are written (joined before the swaps). The tables live in
// PageArrays (uninitialised, huge pages); beside them the build holds one dense copy of the split's
// lengths (4 bytes per sequence). With one epoch they travel with the document ids through
// the shuffle as (id, length) pairs, which the sample-index walk gives back as it copies the
// ids out: never all the pairs beside all the tables.
Result<GptTables> BuildGptTables(io::LeSpan<int32_t> lengths, int64_t begin, int64_t end,
                                 const GptTablesConfig& config, GptTablesTimes* times = nullptr);

// Megatron's build_sample_idx (helpers.cpp) on its own: `lengths[i]` is the length of
// sequence i.
template <typename T>
PageArray<T> BuildSampleIndex(io::LeSpan<int32_t> lengths, std::span<const int32_t> document_index,
                              int64_t seq_length, int64_t num_epochs, int64_t tokens_per_epoch,
                              bool drop_last, bool add_extra_token);

// Number of samples build_sample_idx produces (float32 division without drop_last).
int64_t SampleCount(int64_t num_epochs, int64_t tokens_per_epoch, int64_t seq_length,
                    bool drop_last, bool add_extra_token);

}  // namespace gridfeed::order
