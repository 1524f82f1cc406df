// The ledger: what every step read, one record per sample, written by the first-stage reader of
// each DP rank (tp 0, cp 0). Format (README "Ledger format"): a TSV file per DP rank,
// DIR/dp<r>.tsv, that starts with comment lines carrying the canonical configuration and its
// fingerprint, and holds a "# segment" line with the read schedule (DP, micro and global batch
// size, start cursor and iteration) wherever a run starts or resumes, so a ledger describes
// itself; a resumed run appends to it.
// Mixture schedules amended at a resume (--allow-schedule-change) continue in the same folder:
// the amended run appends a "# schedule position=P fingerprint=F" line and the "# config" line
// of its configuration, the schedule in force from global position P on (the checkpoint's
// schedule_history), and the file becomes format version 3. The header's fingerprint and
// configuration are the schedule in force from position 0. Ledgers without amendments keep
// format version 2, line for line.
// LedgerWriter is not thread safe; Flush makes everything written so far durable.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
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
inline constexpr std::string_view kAmendedFormatLine = "# gridfeed ledger v3";
inline constexpr std::string_view kFormatPrefix = "# gridfeed ledger v";
inline constexpr std::string_view kSegmentPrefix = "# segment ";
inline constexpr std::string_view kFingerprintPrefix = "# fingerprint ";
inline constexpr std::string_view kConfigPrefix = "# config ";
inline constexpr std::string_view kSchedulePrefix = "# schedule ";
inline const char* kLedgerColumns =
    "iteration\tmicro_batch\tdp_rank\tposition\tdataset\tdataset_sample\tfirst_document\t"
    "first_offset\ttoken_xxh3";

// "# segment dp_size=2 micro_batch_size=4 ..." for a schedule; ParseSegment is its inverse.
std::string FormatSegment(const order::ScheduleOptions& s);
Result<order::ScheduleOptions> ParseSegment(const std::string& line);

// "# schedule position=P fingerprint=F"; ParseScheduleLine is its inverse (DataLoss).
std::string FormatScheduleLine(int64_t position, const std::string& fingerprint);
Result<std::pair<int64_t, std::string>> ParseScheduleLine(const std::string& line);

// A mixture schedule in force from a global position on: an entry of a checkpoint's
// schedule_history ({"position", "schedule"}: the --mixture-schedule text).
struct ScheduleEntry {
  int64_t position = 0;
  std::string schedule;
};
// The entries of a schedule_history JSON list; "" gives none. DataLoss for anything else.
Result<std::vector<ScheduleEntry>> ParseScheduleHistory(const std::string& json);

// How a run meets what its ledger folder already holds.
struct LedgerStart {
  // The run continues a checkpoint (--resume): its files continue, trimmed from the cursor on.
  // Otherwise (a fresh run) a folder holding a non-empty dp<r>.tsv is refused, unless
  // `overwrite` (--overwrite-ledger): then every file of the folder starts anew.
  bool resumed = true;
  bool overwrite = false;
};

// The ledger files of one job. Every write to DIR/dp<r>.tsv happens under an exclusive flock of
// DIR/dp<r>.tsv.lock (it names the holder's host and pid), held from Prepare to destruction,
// so a second job on the folder is refused instead of losing the first one's records. The lock
// file is removed (while still held) at destruction; one left by a killed job is taken over.
class LedgerWriter {
 public:
  // Phase 1 of opening; writes no ledger file. Creates DIR, locks DIR/dp<dp_rank>.tsv (DP rank 0
  // also the files of DP ranks the schedule no longer has) and checks what the files hold:
  // FailedPrecondition naming the folder and the holder when another process holds a lock;
  // naming the folder and --overwrite-ledger for a fresh run (start.resumed false) into a
  // non-empty ledger; as Open describes for a file of another configuration.
  static Result<std::unique_ptr<LedgerWriter>> Prepare(const std::string& dir, int dp_rank,
                                                       const std::string& fingerprint,
                                                       const std::string& canonical_config,
                                                       const order::ReadSchedule& schedule,
                                                       const std::vector<ScheduleEntry>& history,
                                                       LedgerStart start);
  // Phase 2, once, after every writer of the job prepared (agreed in between, so a refused run
  // writes nothing anywhere): rewrites the trimmed files, then writes the header (new file) or
  // schedule line (amendment) and the segment line.
  Status Start();

  // Prepare + Start. Creates DIR/dp<dp_rank>.tsv with its header, or appends to it, then writes
  // the segment line of `schedule`. Records the schedule reads again (from its first step's
  // iteration and micro-batch on: what a crashed or older run read after the checkpoint resumed
  // from, including a torn last line) are dropped first, atomically, so the ledger holds each
  // read once, and so are schedule lines from the resume position on; DP rank 0 does the same
  // for the files of DP ranks the schedule no longer has.
  // Without `history` (not a mixture) an existing file must have `fingerprint`. With it (the
  // run's schedule_history, its last entry this run's schedule), the file's schedules must be
  // entries of the history (same position and schedule text, the rest of the configuration
  // equal) and the one of this run's entry, if present, must have `fingerprint`; if absent the
  // run appends its schedule line (an amendment). A new file of an amended run starts from the
  // schedule lines of DIR/dp0.tsv when there is one. FailedPrecondition otherwise, naming the
  // file.
  static Result<std::unique_ptr<LedgerWriter>> Open(const std::string& dir, int dp_rank,
                                                    const std::string& fingerprint,
                                                    const std::string& canonical_config,
                                                    const order::ReadSchedule& schedule,
                                                    const std::vector<ScheduleEntry>& history = {},
                                                    LedgerStart start = {});
  ~LedgerWriter();
  Status Append(const LedgerRecord& r);
  Status Flush();  // fflush + fsync

 private:
  struct Pending;  // what Prepare found and Start writes
  LedgerWriter();
  FILE* file_ = nullptr;
  std::string path_;
  std::vector<std::pair<int, std::string>> locks_;  // held lock files: descriptor, path
  std::unique_ptr<Pending> pending_;
};

// The ledger of a training job (gridfeed run, the toy trainer, the Python Feeder), one call on
// every rank: `writes` on the rank that writes DP rank `dp_rank`'s file (first-stage reader of
// CP rank 0), `schedule_history` the feeder's (JSON, empty without a mixture). `agree` is the
// job's agreement (parallel::AgreeOnStatus over the world); it is called exactly twice on
// every rank, after every writer prepared and after every writer started, so every rank
// returns the same status. nullptr on the ranks that do not write.
Result<std::unique_ptr<LedgerWriter>> OpenJobLedger(
    bool writes, const std::string& dir, int dp_rank, const std::string& fingerprint,
    const std::string& canonical_config, const order::ReadSchedule& schedule,
    const std::string& schedule_history, LedgerStart start,
    const std::function<Status(const Status&)>& agree);

struct Ledger {
  int version = 0;
  std::string fingerprint;       // the header's: the schedule from position 0
  std::string canonical_config;  // the header's
  // A configuration in force from `position` on: [0] the header's (position 0), then each
  // amendment in position order (format version 3).
  struct Schedule {
    int64_t position = 0;
    std::string fingerprint, canonical_config;
  };
  std::vector<Schedule> schedules;
  // The index in `schedules` of the one in force at `position`.
  size_t ScheduleAt(int64_t position) const;
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
// files disagree on the header's fingerprint or on the schedule at a position (a file may lack
// amendments made after its last run: the union of the files' schedules is kept).
Result<Ledger> ReadLedger(const std::string& dir);

}  // namespace gridfeed::audit
