#include "gridfeed/audit/ledger.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "gridfeed/core/parse.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::audit {

std::string FormatRecord(const LedgerRecord& r) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
                "\t%" PRId64 "\t%" PRId64 "\t%016" PRIx64,
                r.iteration, r.micro_batch, r.dp_rank, r.position, r.dataset, r.dataset_sample,
                r.first_document, r.first_offset, r.token_xxh3);
  return buf;
}

std::string FormatSegment(const order::ScheduleOptions& s) {
  return std::string(kSegmentPrefix) + "dp_size=" + std::to_string(s.dp_size) +
         " micro_batch_size=" + std::to_string(s.micro_batch_size) +
         " global_batch_size=" + std::to_string(s.global_batch_size) +
         " start_consumed=" + std::to_string(s.start_consumed) +
         " start_iteration=" + std::to_string(s.start_iteration);
}

Result<order::ScheduleOptions> ParseSegment(const std::string& line) {
  order::ScheduleOptions s;
  if (!line.starts_with(kSegmentPrefix) ||
      std::sscanf(line.c_str() + kSegmentPrefix.size(),
                  "dp_size=%" SCNd64 " micro_batch_size=%" SCNd64 " global_batch_size=%" SCNd64
                  " start_consumed=%" SCNd64 " start_iteration=%" SCNd64,
                  &s.dp_size, &s.micro_batch_size, &s.global_batch_size, &s.start_consumed,
                  &s.start_iteration) != 5 ||
      s.dp_size < 1 || s.micro_batch_size < 1 || s.global_batch_size < 1 || s.start_consumed < 0) {
    return DataLoss("malformed segment line '" + line + "'");
  }
  return s;
}

namespace {

// Rewrites `path` without the records read at or after (iteration, micro_batch) and without a
// torn line; FailedPrecondition when the file belongs to another fingerprint.
Status TrimFile(const std::string& path, const std::string& fingerprint, int64_t iteration,
                int64_t micro_batch) {
  std::ifstream in(path);
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    if (line.starts_with(kFingerprintPrefix) &&
        line.substr(kFingerprintPrefix.size()) != fingerprint) {
      return FailedPrecondition("ledger '" + path + "' belongs to fingerprint " +
                                line.substr(kFingerprintPrefix.size()) + ", this run is " +
                                fingerprint + "; use another --ledger folder");
    }
    if (!line.empty() && line[0] != '#' && line.rfind("iteration\t", 0) != 0) {
      int64_t it, mb;
      if (std::sscanf(line.c_str(), "%" SCNd64 "\t%" SCNd64, &it, &mb) != 2 ||
          std::make_pair(it, mb) >= std::make_pair(iteration, micro_batch) ||
          std::count(line.begin(), line.end(), '\t') != 8) {
        dropped = true;
        continue;
      }
    }
    kept += line + "\n";
  }
  if (dropped) GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(path, kept));
  return Status::Ok();
}

std::string FilePath(const std::string& dir, int64_t dp_rank) {
  return dir + "/dp" + std::to_string(dp_rank) + ".tsv";
}

}  // namespace

Result<std::unique_ptr<LedgerWriter>> LedgerWriter::Open(const std::string& dir, int dp_rank,
                                                         const std::string& fingerprint,
                                                         const std::string& canonical_config,
                                                         const order::ReadSchedule& schedule) {
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(dir));
  std::unique_ptr<LedgerWriter> w(new LedgerWriter());
  w->path_ = FilePath(dir, dp_rank);
  const auto [iteration, micro_batch] = schedule.Place(0);
  const bool exists = std::filesystem::exists(w->path_);
  if (exists) GRIDFEED_RETURN_IF_ERROR(TrimFile(w->path_, fingerprint, iteration, micro_batch));
  if (dp_rank == 0) {
    // Files of DP ranks this run does not have: nobody else trims them.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      int64_t k = 0;
      const std::string name = e.path().filename().string();
      if (std::sscanf(name.c_str(), "dp%" SCNd64 ".tsv", &k) == 1 &&
          name == "dp" + std::to_string(k) + ".tsv" && k >= schedule.options().dp_size) {
        GRIDFEED_RETURN_IF_ERROR(TrimFile(e.path().string(), fingerprint, iteration, micro_batch));
      }
    }
  }
  w->file_ = std::fopen(w->path_.c_str(), "a");
  if (w->file_ == nullptr) {
    return IoError("cannot open ledger '" + w->path_ + "': " + std::strerror(errno));
  }
  std::string header;
  if (!exists) {
    header = std::string(kLedgerFormatLine) + "\n" + std::string(kFingerprintPrefix) + fingerprint +
             "\n" + std::string(kConfigPrefix) + canonical_config + "\n" + kLedgerColumns + "\n";
  }
  header += FormatSegment(schedule.options()) + "\n";
  if (std::fputs(header.c_str(), w->file_) == EOF) {
    return IoError("cannot write ledger '" + w->path_ + "': " + std::strerror(errno));
  }
  return w;
}

LedgerWriter::~LedgerWriter() {
  if (file_ != nullptr) {
    (void)Flush();
    std::fclose(file_);
  }
}

Status LedgerWriter::Append(const LedgerRecord& r) {
  const std::string line = FormatRecord(r) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
    return IoError("cannot write ledger '" + path_ + "'");
  }
  return Status::Ok();
}

Status LedgerWriter::Flush() {
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) {
    return IoError("cannot flush ledger '" + path_ + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<Ledger> ReadLedger(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) return NotFound("no ledger folder '" + dir + "'");
  std::vector<std::pair<int, std::string>> files;
  static const std::regex name(R"(dp(\d+)\.tsv)");
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    const auto rank = std::regex_match(f, m, name) ? ParseInt64(m[1].str()) : std::nullopt;
    if (rank && *rank < (int64_t{1} << 24)) {
      files.push_back({static_cast<int>(*rank), e.path().string()});
    }
  }
  if (files.empty()) return NotFound("ledger folder '" + dir + "' has no dp<r>.tsv files");
  std::sort(files.begin(), files.end());
  Ledger ledger;
  auto same = [](const order::ScheduleOptions& a, const order::ScheduleOptions& b) {
    return a.dp_size == b.dp_size && a.micro_batch_size == b.micro_batch_size &&
           a.global_batch_size == b.global_batch_size && a.start_consumed == b.start_consumed &&
           a.start_iteration == b.start_iteration;
  };
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    std::string line;
    int64_t n = 0;
    int segment = -1;
    int64_t segment_line = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      if (line.starts_with(kFormatPrefix)) {
        const int version = std::atoi(line.c_str() + kFormatPrefix.size());
        if (version < 1 || version > 2) {
          return DataLoss("ledger '" + path + "' has format version " +
                          line.substr(kFormatPrefix.size()) + "; this gridfeed reads 1 and 2");
        }
        if (ledger.version != 0 && ledger.version != version) {
          return FailedPrecondition("ledger '" + path + "' mixes format versions");
        }
        ledger.version = version;
        continue;
      }
      if (line.starts_with(kSegmentPrefix)) {
        auto seg = ParseSegment(line);
        if (!seg.ok()) {
          return DataLoss("ledger '" + path + "' line " + std::to_string(n) + ": " +
                          seg.status().message());
        }
        auto it = std::find_if(ledger.segments.begin(), ledger.segments.end(),
                               [&](const auto& s) { return same(s, *seg); });
        segment = static_cast<int>(it - ledger.segments.begin());
        segment_line = n;
        if (it == ledger.segments.end()) ledger.segments.push_back(*seg);
        continue;
      }
      if (line.starts_with(kFingerprintPrefix)) {
        const std::string fp = line.substr(kFingerprintPrefix.size());
        if (!ledger.fingerprint.empty() && fp != ledger.fingerprint) {
          return FailedPrecondition("ledger '" + path + "' has fingerprint " + fp +
                                    ", other files " + ledger.fingerprint);
        }
        ledger.fingerprint = fp;
        continue;
      }
      if (line.starts_with(kConfigPrefix)) {
        ledger.canonical_config = line.substr(kConfigPrefix.size());
        continue;
      }
      if (line[0] == '#' || line.rfind("iteration\t", 0) == 0) continue;
      LedgerRecord r;
      char hash[32] = {0};
      const int got = std::sscanf(line.c_str(),
                                  "%" SCNd64 "\t%" SCNd64 "\t%" SCNd64 "\t%" SCNd64 "\t%" SCNd64
                                  "\t%" SCNd64 "\t%" SCNd64 "\t%" SCNd64 "\t%31s",
                                  &r.iteration, &r.micro_batch, &r.dp_rank, &r.position, &r.dataset,
                                  &r.dataset_sample, &r.first_document, &r.first_offset, hash);
      if (got == 9 && (std::strlen(hash) != 16 || std::strspn(hash, "0123456789abcdef") != 16)) {
        return DataLoss("ledger '" + path + "' line " + std::to_string(n) +
                        ": a torn or malformed token hash '" + hash + "'");
      }
      if (got != 9) {
        return DataLoss("ledger '" + path + "' line " + std::to_string(n) +
                        ": expected 9 tab-separated fields, got '" + line + "'");
      }
      r.token_xxh3 = std::strtoull(hash, nullptr, 16);
      ledger.entries.push_back({r, path, n, rank, segment, segment_line});
    }
  }
  if (ledger.canonical_config.empty()) return DataLoss("ledger '" + dir + "' has no # config line");
  return ledger;
}

}  // namespace gridfeed::audit
