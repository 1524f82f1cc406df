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

Result<std::unique_ptr<LedgerWriter>> LedgerWriter::Open(const std::string& dir, int dp_rank,
                                                         const std::string& fingerprint,
                                                         const std::string& canonical_config,
                                                         int64_t resume_position) {
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(dir));
  std::unique_ptr<LedgerWriter> w(new LedgerWriter());
  w->path_ = dir + "/dp" + std::to_string(dp_rank) + ".tsv";
  const bool exists = std::filesystem::exists(w->path_);
  if (exists) {
    std::ifstream in(w->path_);
    std::string line, kept;
    bool dropped = false;
    while (std::getline(in, line)) {
      if (line.starts_with(kFingerprintPrefix) &&
          line.substr(kFingerprintPrefix.size()) != fingerprint) {
        return FailedPrecondition("ledger '" + w->path_ + "' belongs to fingerprint " +
                                  line.substr(kFingerprintPrefix.size()) + ", this run is " +
                                  fingerprint + "; use another --ledger folder");
      }
      if (!line.empty() && line[0] != '#' && line.rfind("iteration\t", 0) != 0) {
        int64_t it, mb, dp, position;
        if (std::sscanf(line.c_str(), "%" SCNd64 "\t%" SCNd64 "\t%" SCNd64 "\t%" SCNd64, &it, &mb,
                        &dp, &position) != 4 ||
            position >= resume_position || std::count(line.begin(), line.end(), '\t') != 8) {
          dropped = true;
          continue;
        }
      }
      kept += line + "\n";
    }
    if (dropped) GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(w->path_, kept));
  }
  w->file_ = std::fopen(w->path_.c_str(), "a");
  if (w->file_ == nullptr) {
    return IoError("cannot open ledger '" + w->path_ + "': " + std::strerror(errno));
  }
  if (!exists) {
    const std::string header =
        std::string(kLedgerFormatLine) + "\n" + std::string(kFingerprintPrefix) + fingerprint +
        "\n" + std::string(kConfigPrefix) + canonical_config + "\n" + kLedgerColumns + "\n";
    std::fputs(header.c_str(), w->file_);
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
    if (std::regex_match(f, m, name)) files.push_back({std::stoi(m[1]), e.path().string()});
  }
  if (files.empty()) return NotFound("ledger folder '" + dir + "' has no dp<r>.tsv files");
  std::sort(files.begin(), files.end());
  Ledger ledger;
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    std::string line;
    int64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
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
      if (got != 9) {
        return DataLoss("ledger '" + path + "' line " + std::to_string(n) +
                        ": expected 9 tab-separated fields, got '" + line + "'");
      }
      r.token_xxh3 = std::strtoull(hash, nullptr, 16);
      ledger.entries.push_back({r, path, n});
    }
  }
  if (ledger.canonical_config.empty()) return DataLoss("ledger '" + dir + "' has no # config line");
  return ledger;
}

}  // namespace gridfeed::audit
