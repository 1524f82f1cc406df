// When a run may continue from a checkpoint, and from where. Pure; thread safe.
//
// Refused: a cursor whose configuration text does not hash to its fingerprint (corrupt), another
// data order (the message names the first changed field), token files whose sampled contents
// changed since the save (same sizes and index, other tokens), another global batch size unless
// allowed (then the run continues from the same global sample), and for orders that depend on
// the batch geometry (cyclic sampling) any change of micro-batch size or DP size. Allowed: any
// other change of DP/TP/PP/CP sizes (the cursor is global). A changed mixture schedule (and
// nothing else) is refused naming the first differing stage, unless allow_schedule_change and
// check_same_past (which recomputes the saved order and compares it with the new one up to the
// cursor) accepts it: then the run continues with the amended schedule. A cursor past
// max_consumed is refused (DataLoss naming the file) before anything else is compared.
#pragma once

#include <cstdint>
#include <functional>
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
  bool allow_schedule_change = false;
  // The most consumed samples a checkpoint of this run can hold (the single sampler stops at the
  // split's length); a cursor beyond it is refused as forged or corrupt. -1: no bound (cyclic).
  int64_t max_consumed = -1;
  // OK when the saved order and this run's agree on every position before the cursor.
  std::function<Status(const Cursor& saved)> check_same_past;
};

struct ResumePoint {
  int64_t consumed_samples = 0;
  int64_t iteration = 0;
  bool schedule_amended = false;  // accepted with another mixture schedule
};

Result<ResumePoint> CheckResume(const Cursor& saved, const ResumeRequest& now);

// A canonical text without its mixture schedule and the facts that follow from it (what an
// amendment leaves unchanged), e.g. to salt the token store digests of a mixture run.
std::string WithoutScheduleText(const std::string& canonical);

// The first part of a mixture schedule (canonical JSON) that differs: "sources", "stage 'x'
// (schedule[i])" or "max_epochs".
std::string FirstChangedStage(const std::string& before_schedule,
                              const std::string& after_schedule);

}  // namespace gridfeed::checkpoint
