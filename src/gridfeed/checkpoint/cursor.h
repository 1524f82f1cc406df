// The consumed-sample cursor and its HDF5 schema (README "Checkpoint format").
//
// Group /gridfeed of a file of gridfeed's own, written by one rank: the file is built in memory,
// then published with io::AtomicFile (exclusive temporary, checked writes, fsync, rename over the
// target, fsync of the directory), so a crash or a full disk leaves the old checkpoint or the
// new one, never a mix. Datasets are chunked with the Fletcher32 checksum, so a flipped byte is
// reported as corruption. A reader of format version N rejects version N+1 with a clear message.
// Local (no MPI); thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::checkpoint {

inline constexpr int64_t kFormatVersion = 1;

struct Cursor {
  std::string fingerprint;             // hex XXH3-64 of canonical_config
  std::string canonical_config;        // JSON: every option and data fact that decides the order
  int64_t iteration = 0;               // training step at save time
  int64_t consumed_train_samples = 0;  // global
  int64_t consumed_valid_samples = 0;
  int64_t consumed_test_samples = 0;
  std::vector<int64_t> source_samples;  // per blend source (train), consumed so far
  std::vector<int64_t> source_tokens;
  int64_t dp = 1, tp = 1, pp = 1, cp = 1;
  int64_t micro_batch_size = 1, global_batch_size = 1;
  // What identifies the token files' contents (index digests, sizes, sampled data digests; one
  // line per store), so a resume notices a changed file of the same size. Optional: empty in
  // checkpoints written before it existed.
  std::string token_store_facts;
  // The cursor in the data order's own terms (JSON from the pipeline, e.g. OLMo's epoch and
  // instances seen this epoch), for people and tools; the resume uses consumed_train_samples.
  // Optional: empty when the order has none.
  std::string order_position;
  // Mixture schedules only: JSON list of {"position", "fingerprint", "schedule"}, the schedule
  // in force from each position on (an amended resume appends one). Optional.
  std::string schedule_history;
};

// IoError (naming the file and errno) if any step fails; the old file at `path` is untouched then
// and no temporary remains. InvalidArgument, nothing written, for a cursor ReadCursor would
// refuse (see there) and for a path that is empty or holds a NUL.
Status WriteCursor(const std::string& path, const Cursor& cursor);
// NotFound for a missing file, IoError (without blocking) for a FIFO or other
// non-regular file. DataLoss (naming the file and the dataset) for a corrupt,
// truncated or hand-edited one: every dataset must be rank 1, int64, carry the Fletcher32 filter
// and have its schema's extent (source arrays: equal, at most 2^20), values must be in range
// (version >= 1, iteration in [0, 2^40] (what --train-iters allows), consumed counts in
// [0, 2^62], grid sizes in [1, 2^24], batch sizes in [1, 2^40]), and a schedule_history must be
// a list of {"position", "schedule"} with positions in order, none past the cursor, each
// schedule one that parses (a forged history is never carried forward); sizes are checked
// before anything is allocated. FailedPrecondition for a newer format version.
Result<Cursor> ReadCursor(const std::string& path);

}  // namespace gridfeed::checkpoint
