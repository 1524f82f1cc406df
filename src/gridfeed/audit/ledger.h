// The ledger: what every step read, one record per sample, written by the first-stage reader of
// each DP rank (tp 0, cp 0). Format (README "Ledger format"): a TSV file per DP rank,
// DIR/dp<r>.tsv, that starts with comment lines carrying the canonical configuration and its
// fingerprint, and holds a "# segment" line with the read schedule (DP, micro and global batch
// size, start cursor and iteration) wherever a run starts or resumes, so a ledger describes
// itself; a resumed run appends to it.
// LedgerWriter is not thread safe; Flush makes everything written so far durable.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/read_schedule.h"
#include "gridfeed/order/sample_record.h"

namespace gridfeed::audit {

using LedgerRecord = order::SampleRecord;

std::string FormatRecord(const LedgerRecord& r);
// Header lines of a ledger file: the format line, then the fingerprint and the canonical
// configuration, each after its prefix.
inline constexpr std::string_view kLedgerFormatLine = "# gridfeed ledger v2";
inline constexpr std::string_view kFormatPrefix = "# gridfeed ledger v";
inline constexpr std::string_view kSegmentPrefix = "# segment ";
inline constexpr std::string_view kFingerprintPrefix = "# fingerprint ";
inline constexpr std::string_view kConfigPrefix = "# config ";
inline const char* kLedgerColumns =
    "iteration\tmicro_batch\tdp_rank\tposition\tdataset\tdataset_sample\tfirst_document\t"
    "first_offset\ttoken_xxh3";

// "# segment dp_size=2 micro_batch_size=4 ..." for a schedule; ParseSegment is its inverse.
std::string FormatSegment(const order::ScheduleOptions& s);
Result<order::ScheduleOptions> ParseSegment(const std::string& line);

class LedgerWriter {
 public:
  // Creates DIR/dp<dp_rank>.tsv with its header, or appends to it after checking that its
  // fingerprint is `fingerprint` (FailedPrecondition otherwise), then writes the segment line of
  // `schedule`. Records the schedule reads again (from its first step's iteration and
  // micro-batch on: what a crashed or older run read after the checkpoint resumed from,
  // including a torn last line) are dropped first, atomically, so the ledger holds each read
  // once; DP rank 0 does the same for the files of DP ranks the schedule no longer has.
  static Result<std::unique_ptr<LedgerWriter>> Open(const std::string& dir, int dp_rank,
                                                    const std::string& fingerprint,
                                                    const std::string& canonical_config,
                                                    const order::ReadSchedule& schedule);
  ~LedgerWriter();
  Status Append(const LedgerRecord& r);
  Status Flush();  // fflush + fsync

 private:
  LedgerWriter() = default;
  FILE* file_ = nullptr;
  std::string path_;
};

struct Ledger {
  int version = 0;
  std::string fingerprint;
  std::string canonical_config;
  struct Entry {
    LedgerRecord record;
    std::string file;
    int64_t line = 0;
    int file_dp_rank = 0;      // r of dp<r>.tsv
    int segment = -1;          // index into `segments` of the run that wrote it (-1: version 1)
    int64_t segment_line = 0;  // line of that run's segment line in `file`
  };
  std::vector<Entry> entries;                    // in file order, files in DP-rank order
  std::vector<order::ScheduleOptions> segments;  // distinct, in order of first appearance
};

// Reads every dp<r>.tsv of DIR; DataLoss for malformed lines, FailedPrecondition when the
// files disagree on the fingerprint.
Result<Ledger> ReadLedger(const std::string& dir);

}  // namespace gridfeed::audit
