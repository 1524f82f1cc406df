// The ledger: what every step read, one record per sample, written by the first-stage reader of
// each DP rank (tp 0, cp 0). Format (README "Ledger format"): a TSV file per DP rank,
// DIR/dp<r>.tsv, that starts with comment lines carrying the canonical configuration and its
// fingerprint, so a ledger describes itself; a resumed run appends to it.
// LedgerWriter is not thread safe; Flush makes everything written so far durable.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/sample_record.h"

namespace gridfeed::audit {

using LedgerRecord = order::SampleRecord;

std::string FormatRecord(const LedgerRecord& r);
// Header lines of a ledger file: the format line, then the fingerprint and the canonical
// configuration, each after its prefix.
inline constexpr std::string_view kLedgerFormatLine = "# gridfeed ledger v1";
inline constexpr std::string_view kFingerprintPrefix = "# fingerprint ";
inline constexpr std::string_view kConfigPrefix = "# config ";
inline const char* kLedgerColumns =
    "iteration\tmicro_batch\tdp_rank\tposition\tdataset\tdataset_sample\tfirst_document\t"
    "first_offset\ttoken_xxh3";

class LedgerWriter {
 public:
  // Creates DIR/dp<dp_rank>.tsv with its header, or appends to it after checking that its
  // fingerprint is `fingerprint` (FailedPrecondition otherwise). Records at or beyond
  // `resume_position` (the cursor a resumed run starts from: what a crashed run read after its
  // last checkpoint, including a torn last line) are dropped first, atomically, so the ledger
  // holds each consumed position once.
  static Result<std::unique_ptr<LedgerWriter>> Open(const std::string& dir, int dp_rank,
                                                    const std::string& fingerprint,
                                                    const std::string& canonical_config,
                                                    int64_t resume_position);
  ~LedgerWriter();
  Status Append(const LedgerRecord& r);
  Status Flush();  // fflush + fsync

 private:
  LedgerWriter() = default;
  FILE* file_ = nullptr;
  std::string path_;
};

struct Ledger {
  std::string fingerprint;
  std::string canonical_config;
  struct Entry {
    LedgerRecord record;
    std::string file;
    int64_t line = 0;
  };
  std::vector<Entry> entries;  // in file order, files in DP-rank order
};

// Reads every dp<r>.tsv of DIR; DataLoss for malformed lines, FailedPrecondition when the
// files disagree on the fingerprint.
Result<Ledger> ReadLedger(const std::string& dir);

}  // namespace gridfeed::audit
