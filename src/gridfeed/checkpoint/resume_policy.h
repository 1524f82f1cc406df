// When a run may continue from a checkpoint, and from where. Pure; thread safe.
//
// Refused: a cursor whose configuration text does not hash to its fingerprint (corrupt), another
// data order (the message names the first changed field), token files whose sampled contents
// changed since the save (same sizes and index, other tokens), another global batch size unless
// allowed (then the run continues from the same global sample), and for orders that depend on
// the batch geometry (cyclic sampling) any change of micro-batch size or DP size. Allowed: any
// other change of DP/TP/PP/CP sizes (the cursor is global).
#pragma once

#include <cstdint>
#include <string>

#include "gridfeed/checkpoint/cursor.h"
#include "gridfeed/core/status.h"

namespace gridfeed::checkpoint {

struct ResumeRequest {
  std::string path;  // for messages
  std::string fingerprint, canonical_config;
  std::string token_store_facts;  // as Cursor::token_store_facts, seen by this run's rank 0
  int64_t micro_batch_size = 1, dp = 1, global_batch_size = 1;
  bool allow_batch_size_change = false;
  bool order_depends_on_geometry = false;
};

struct ResumePoint {
  int64_t consumed_samples = 0;
  int64_t iteration = 0;
};

Result<ResumePoint> CheckResume(const Cursor& saved, const ResumeRequest& now);

}  // namespace gridfeed::checkpoint
