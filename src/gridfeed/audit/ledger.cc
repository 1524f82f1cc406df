#include "gridfeed/audit/ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include "gridfeed/config/canonical.h"
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

std::string FormatScheduleLine(int64_t position, const std::string& fingerprint) {
  return std::string(kSchedulePrefix) + "position=" + std::to_string(position) +
         " fingerprint=" + fingerprint;
}

Result<std::pair<int64_t, std::string>> ParseScheduleLine(const std::string& line) {
  int64_t position = -1;
  char fp[64] = {0};
  if (!line.starts_with(kSchedulePrefix) ||
      std::sscanf(line.c_str() + kSchedulePrefix.size(), "position=%" SCNd64 " fingerprint=%63s",
                  &position, fp) != 2 ||
      position < 1 || FormatScheduleLine(position, fp) != line) {
    return DataLoss("malformed schedule line '" + line + "'");
  }
  return std::pair<int64_t, std::string>(position, fp);
}

Result<std::vector<ScheduleEntry>> ParseScheduleHistory(const std::string& json) {
  std::vector<ScheduleEntry> out;
  if (json.empty()) return out;
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_array()) return DataLoss("a schedule history is not a JSON list");
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("position") || !e["position"].is_number_integer() ||
        !e.contains("schedule") || !e["schedule"].is_string() || e["position"].get<int64_t>() < 0 ||
        (!out.empty() && e["position"].get<int64_t>() < out.back().position)) {
      return DataLoss("malformed schedule history entry " + e.dump());
    }
    out.push_back({e["position"].get<int64_t>(), e["schedule"].get<std::string>()});
  }
  return out;
}

size_t Ledger::ScheduleAt(int64_t position) const {
  size_t i = 0;
  while (i + 1 < schedules.size() && schedules[i + 1].position <= position) ++i;
  return i;
}

namespace {

// A ledger file's lines after a resume's trim, and the schedules they name (header first).
struct FileImage {
  std::vector<std::string> lines;
  std::vector<Ledger::Schedule> schedules;
  bool changed = false;
};

// Reads `path` without the records read at or after (iteration, micro_batch), without a torn
// line and without the schedule lines (and their config lines) at positions >= `from`.
Result<FileImage> LoadTrimmed(const std::string& path, int64_t iteration, int64_t micro_batch,
                              int64_t from) {
  std::ifstream in(path);
  if (!in) return IoError("cannot read ledger '" + path + "': " + std::strerror(errno));
  FileImage img;
  std::string line;
  bool config_of_schedule = false, drop_config = false;
  while (std::getline(in, line)) {
    if (line.starts_with(kFingerprintPrefix) && img.schedules.empty()) {
      img.schedules.push_back({0, line.substr(kFingerprintPrefix.size()), ""});
    } else if (line.starts_with(kSchedulePrefix)) {
      auto sl = ParseScheduleLine(line);
      if (!sl.ok()) return sl.status().WithContext("ledger '" + path + "'");
      config_of_schedule = true;
      drop_config = sl->first >= from;
      if (drop_config) {
        img.changed = true;
        continue;
      }
      img.schedules.push_back({sl->first, sl->second, ""});
    } else if (line.starts_with(kConfigPrefix)) {
      const bool drop = config_of_schedule && drop_config;
      config_of_schedule = drop_config = false;
      if (drop) continue;
      if (!img.schedules.empty() && img.schedules.back().canonical_config.empty()) {
        img.schedules.back().canonical_config = line.substr(kConfigPrefix.size());
      }
    } else if (!line.empty() && line[0] != '#' && line.rfind("iteration\t", 0) != 0) {
      int64_t it, mb;
      if (std::sscanf(line.c_str(), "%" SCNd64 "\t%" SCNd64, &it, &mb) != 2 ||
          std::make_pair(it, mb) >= std::make_pair(iteration, micro_batch) ||
          std::count(line.begin(), line.end(), '\t') != 8) {
        img.changed = true;
        continue;
      }
    }
    img.lines.push_back(line);
  }
  return img;
}

// Whether this run may write to a file holding `img`; sets *append when the run's schedule (an
// amendment) is not in the file yet.
Status CheckCompatible(const std::string& path, const FileImage& img,
                       const std::string& fingerprint, const std::string& canonical,
                       const std::vector<ScheduleEntry>& history, bool* append) {
  *append = false;
  if (img.schedules.empty()) return Status::Ok();  // no header yet
  const auto& header = img.schedules.front();
  auto other = [&](const std::string& why) {
    return FailedPrecondition("ledger '" + path + "' belongs to fingerprint " + header.fingerprint +
                              ", this run is " + fingerprint + " (" + why +
                              "); use another --ledger folder");
  };
  if (history.empty()) {
    if (img.schedules.back().fingerprint != fingerprint) return other("another configuration");
    return Status::Ok();
  }
  if (config::WithoutMixtureSchedule(header.canonical_config) !=
      config::WithoutMixtureSchedule(canonical)) {
    return other("another configuration besides the mixture schedule");
  }
  if (config::MixtureScheduleOf(header.canonical_config) != history.front().schedule) {
    return other("its first mixture schedule is not the first of this run's schedule history");
  }
  for (size_t i = 1; i < img.schedules.size(); ++i) {
    const auto& s = img.schedules[i];
    const bool known = std::any_of(history.begin() + 1, history.end(), [&](const auto& h) {
      return h.position == s.position &&
             h.schedule == config::MixtureScheduleOf(s.canonical_config);
    });
    if (!known) {
      return FailedPrecondition("ledger '" + path + "' holds a mixture schedule from position " +
                                std::to_string(s.position) +
                                " that this run's schedule history (from its checkpoint) does "
                                "not; use another --ledger folder");
    }
  }
  const ScheduleEntry& now = history.back();
  for (size_t i = 0; i < img.schedules.size(); ++i) {
    const int64_t position = i == 0 ? history.front().position : img.schedules[i].position;
    if (position != now.position) continue;
    if (img.schedules[i].fingerprint != fingerprint) {
      return FailedPrecondition("ledger '" + path + "' holds fingerprint " +
                                img.schedules[i].fingerprint + " from position " +
                                std::to_string(position) + ", this run is " + fingerprint +
                                "; use another --ledger folder");
    }
    return Status::Ok();
  }
  *append = true;
  return Status::Ok();
}

Status WriteImage(const std::string& path, const FileImage& img) {
  std::string text;
  for (const auto& l : img.lines) text += l + "\n";
  return io::WriteStringToFile(path, text);
}

std::string FilePath(const std::string& dir, int64_t dp_rank) {
  return dir + "/dp" + std::to_string(dp_rank) + ".tsv";
}

// Opens and exclusively locks `lock` (without waiting), recording this process in it;
// FailedPrecondition naming the folder and the holder when another process has it.
Result<int> TryLockLedgerFile(const std::string& dir, const std::string& lock) {
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return IoError("cannot open the lock file '" + lock + "' of ledger folder '" + dir +
                   "': " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {0};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    std::string who(holder, n > 0 ? static_cast<size_t>(n) : 0);
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
    if (err != EWOULDBLOCK) {
      return IoError("cannot lock '" + lock + "' of ledger folder '" + dir +
                     "': " + std::strerror(err));
    }
    return FailedPrecondition("ledger folder '" + dir + "' is in use by another job (" + lock +
                              " is held by " + (who.empty() ? "another process" : who) +
                              "); two jobs on one ledger folder would lose records: use another "
                              "--ledger folder");
  }
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const std::string me = "host " + std::string(host) + " pid " + std::to_string(::getpid()) + "\n";
  // Best effort: the holder's name is for messages only.
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) < 0) {
    (void)0;
  }
  return fd;
}

// Takes the exclusive lock of ledger file `file` (DIR/dp<r>.tsv) for as long as the returned
// descriptor is open, and records this process in it; FailedPrecondition naming the folder and
// the holder when another process has it.
Result<int> LockLedgerFile(const std::string& dir, const std::string& file) {
  const std::string lock = file + ".lock";
  // The holder removes the file before it lets go: a lock taken on a file that is no longer
  // the one at `lock` is worthless, so take the new one.
  for (int attempt = 0;; ++attempt) {
    GRIDFEED_ASSIGN_OR_RETURN(const int fd, TryLockLedgerFile(dir, lock));
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) == 0 && ::stat(lock.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      return fd;
    }
    ::close(fd);
    if (attempt == 100) {
      return IoError("cannot lock '" + lock + "' of ledger folder '" + dir +
                     "': it keeps being replaced");
    }
  }
}

// A file holding anything at all (a header is already a ledger).
bool NonEmpty(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  const auto size = std::filesystem::file_size(path, ec);
  return !ec && size > 0;
}

// The dp<k>.tsv files of `dir` with their k.
std::vector<std::pair<int64_t, std::string>> LedgerFiles(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    int64_t k = 0;
    const std::string name = e.path().filename().string();
    if (std::sscanf(name.c_str(), "dp%" SCNd64 ".tsv", &k) == 1 &&
        name == "dp" + std::to_string(k) + ".tsv") {
      out.push_back({k, e.path().string()});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

struct LedgerWriter::Pending {
  FileImage img;
  bool append = false;   // this run's schedule line goes in (an amendment)
  bool replace = false;  // --overwrite-ledger on a fresh run: the file starts anew
  std::string header;    // what Start appends
  // DP rank 0: the files of DP ranks the schedule no longer has (rewritten or, replacing,
  // removed).
  std::vector<std::pair<std::string, FileImage>> others;
};

LedgerWriter::LedgerWriter() = default;

Result<std::unique_ptr<LedgerWriter>> LedgerWriter::Prepare(
    const std::string& dir, int dp_rank, const std::string& fingerprint,
    const std::string& canonical_config, const order::ReadSchedule& schedule,
    const std::vector<ScheduleEntry>& history, LedgerStart start) {
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(dir));
  std::unique_ptr<LedgerWriter> w(new LedgerWriter());
  w->pending_ = std::make_unique<Pending>();
  Pending& p = *w->pending_;
  w->path_ = FilePath(dir, dp_rank);
  GRIDFEED_ASSIGN_OR_RETURN(const int own, LockLedgerFile(dir, w->path_));
  w->locks_.push_back({own, w->path_ + ".lock"});
  const int64_t dp_size = schedule.options().dp_size;
  std::vector<std::string> others;  // DP rank 0: files beyond this run's DP ranks
  if (dp_rank == 0) {
    for (const auto& [k, path] : LedgerFiles(dir)) {
      if (k < dp_size) continue;
      GRIDFEED_ASSIGN_OR_RETURN(const int fd, LockLedgerFile(dir, path));
      w->locks_.push_back({fd, path + ".lock"});
      others.push_back(path);
    }
  }
  if (!start.resumed) {
    // A fresh run would rewrite the ledger from its start: the very mistake a ledger exists to
    // catch (weights reloaded, the data cursor forgotten). Every writer looks at every file: no
    // writer of this job has written yet (Start follows an agreement).
    std::string found = NonEmpty(w->path_) ? w->path_ : "";
    if (found.empty()) {
      for (const auto& [k, path] : LedgerFiles(dir)) {
        if (NonEmpty(path)) {
          found = path;
          break;
        }
      }
    }
    if (!found.empty() && !start.overwrite) {
      return FailedPrecondition("ledger folder '" + dir + "' already holds a ledger ('" + found +
                                "') and this run does not resume from a checkpoint: it would "
                                "rewrite the ledger from position 0; resume with --resume, use "
                                "another --ledger folder, or pass --overwrite-ledger to replace "
                                "it");
    }
    if (!found.empty() || start.overwrite) {
      p.replace = true;
      for (const auto& path : others) p.others.push_back({path, FileImage()});
      p.header = std::string(kLedgerFormatLine) + "\n" + std::string(kFingerprintPrefix) +
                 fingerprint + "\n" + std::string(kConfigPrefix) + canonical_config + "\n" +
                 kLedgerColumns + "\n" + FormatSegment(schedule.options()) + "\n";
      return w;
    }
  }
  const auto [iteration, micro_batch] = schedule.Place(0);
  const int64_t from = schedule.options().start_consumed;
  const bool exists = std::filesystem::exists(w->path_);
  FileImage& img = p.img;
  if (exists) {
    GRIDFEED_ASSIGN_OR_RETURN(img, LoadTrimmed(w->path_, iteration, micro_batch, from));
  } else if (history.size() > 1 && std::filesystem::exists(FilePath(dir, 0))) {
    // A new DP rank of an amended run: the schedules so far, from DP rank 0's file.
    GRIDFEED_ASSIGN_OR_RETURN(img, LoadTrimmed(FilePath(dir, 0), iteration, micro_batch, from));
    std::erase_if(img.lines, [](const std::string& l) {
      return !l.starts_with("#") ? l.rfind("iteration\t", 0) != 0 : l.starts_with(kSegmentPrefix);
    });
    img.changed = true;
  }
  GRIDFEED_RETURN_IF_ERROR(
      CheckCompatible(w->path_, img, fingerprint, canonical_config, history, &p.append));
  if (p.append && !img.lines.empty() && img.lines.front() != kAmendedFormatLine) {
    // Holds an amendment from now on (a version-1 file had no format line).
    if (img.lines.front().starts_with(kFormatPrefix)) {
      img.lines.front() = std::string(kAmendedFormatLine);
    } else {
      img.lines.insert(img.lines.begin(), std::string(kAmendedFormatLine));
    }
    img.changed = true;
  }
  // Files of DP ranks this run does not have: nobody else trims them.
  for (const auto& path : others) {
    GRIDFEED_ASSIGN_OR_RETURN(auto other, LoadTrimmed(path, iteration, micro_batch, from));
    bool unused = false;
    GRIDFEED_RETURN_IF_ERROR(
        CheckCompatible(path, other, fingerprint, canonical_config, history, &unused));
    if (other.changed) p.others.push_back({path, std::move(other)});
  }
  if (img.lines.empty()) {
    p.header = std::string(kLedgerFormatLine) + "\n" + std::string(kFingerprintPrefix) +
               fingerprint + "\n" + std::string(kConfigPrefix) + canonical_config + "\n" +
               kLedgerColumns + "\n";
  } else if (p.append) {
    p.header = FormatScheduleLine(history.back().position, fingerprint) + "\n" +
               std::string(kConfigPrefix) + canonical_config + "\n";
  }
  p.header += FormatSegment(schedule.options()) + "\n";
  return w;
}

Status LedgerWriter::Start() {
  if (!pending_) return FailedPrecondition("ledger '" + path_ + "' was started already");
  const Pending& p = *pending_;
  if (p.replace || p.img.changed) GRIDFEED_RETURN_IF_ERROR(WriteImage(path_, p.img));
  for (const auto& [path, img] : p.others) {
    if (p.replace) {
      std::error_code ec;
      if (!std::filesystem::remove(path, ec) && ec) {
        return IoError("cannot remove ledger '" + path + "': " + ec.message());
      }
    } else {
      GRIDFEED_RETURN_IF_ERROR(WriteImage(path, img));
    }
  }
  file_ = std::fopen(path_.c_str(), "a");
  if (file_ == nullptr) {
    return IoError("cannot open ledger '" + path_ + "': " + std::strerror(errno));
  }
  if (std::fputs(p.header.c_str(), file_) == EOF) {
    return IoError("cannot write ledger '" + path_ + "': " + std::strerror(errno));
  }
  pending_.reset();
  return Status::Ok();
}

Result<std::unique_ptr<LedgerWriter>> LedgerWriter::Open(const std::string& dir, int dp_rank,
                                                         const std::string& fingerprint,
                                                         const std::string& canonical_config,
                                                         const order::ReadSchedule& schedule,
                                                         const std::vector<ScheduleEntry>& history,
                                                         LedgerStart start) {
  GRIDFEED_ASSIGN_OR_RETURN(
      auto w, Prepare(dir, dp_rank, fingerprint, canonical_config, schedule, history, start));
  GRIDFEED_RETURN_IF_ERROR(w->Start());
  return w;
}

Result<std::unique_ptr<LedgerWriter>> OpenJobLedger(
    bool writes, const std::string& dir, int dp_rank, const std::string& fingerprint,
    const std::string& canonical_config, const order::ReadSchedule& schedule,
    const std::string& schedule_history, LedgerStart start,
    const std::function<Status(const Status&)>& agree) {
  std::unique_ptr<LedgerWriter> w;
  Status prepared;
  if (writes) {
    auto history = ParseScheduleHistory(schedule_history);
    auto r = history.ok() ? LedgerWriter::Prepare(dir, dp_rank, fingerprint, canonical_config,
                                                  schedule, *history, start)
                          : Result<std::unique_ptr<LedgerWriter>>(history.status());
    if (r.ok()) {
      w = std::move(r).value();
    } else {
      prepared = r.status();
    }
  }
  GRIDFEED_RETURN_IF_ERROR(agree(prepared));
  GRIDFEED_RETURN_IF_ERROR(agree(w ? w->Start() : Status::Ok()));
  return w;
}

LedgerWriter::~LedgerWriter() {
  if (file_ != nullptr) {
    (void)Flush();
    std::fclose(file_);
  }
  for (const auto& [fd, lock] : locks_) {
    ::unlink(lock.c_str());  // while held: nobody takes a lock on a file about to vanish
    ::close(fd);             // releases it
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
  std::map<int64_t, Ledger::Schedule> amendments;  // by position, over all files
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    std::string line;
    int64_t n = 0;
    int segment = -1;
    int64_t segment_line = 0;
    int file_version = 0;
    bool header_seen = false;
    std::optional<Ledger::Schedule> pending;  // a schedule line waiting for its config line
    while (std::getline(in, line)) {
      ++n;
      const std::string where = "ledger '" + path + "' line " + std::to_string(n);
      if (line.empty()) continue;
      if (pending && !line.starts_with(kConfigPrefix)) {
        return DataLoss(where + ": a schedule line without its config line");
      }
      if (line.starts_with(kFormatPrefix)) {
        const int version = std::atoi(line.c_str() + kFormatPrefix.size());
        if (version < 1 || version > 3) {
          return DataLoss("ledger '" + path + "' has format version " +
                          line.substr(kFormatPrefix.size()) + "; this gridfeed reads 1 to 3");
        }
        // Version 3 only adds schedule lines to version 2: files of one ledger may differ so.
        if (ledger.version != 0 && (ledger.version < 2) != (version < 2)) {
          return FailedPrecondition("ledger '" + path + "' mixes format versions");
        }
        ledger.version = std::max(ledger.version, version);
        file_version = version;
        continue;
      }
      if (line.starts_with(kSegmentPrefix)) {
        auto seg = ParseSegment(line);
        if (!seg.ok()) return DataLoss(where + ": " + seg.status().message());
        auto it = std::find_if(ledger.segments.begin(), ledger.segments.end(),
                               [&](const auto& s) { return same(s, *seg); });
        segment = static_cast<int>(it - ledger.segments.begin());
        segment_line = n;
        if (it == ledger.segments.end()) ledger.segments.push_back(*seg);
        continue;
      }
      if (line.starts_with(kSchedulePrefix)) {
        if (file_version < 3) return DataLoss(where + ": a schedule line in a version-2 ledger");
        auto sl = ParseScheduleLine(line);
        if (!sl.ok()) return DataLoss(where + ": " + sl.status().message());
        pending = Ledger::Schedule{sl->first, sl->second, ""};
        continue;
      }
      if (line.starts_with(kFingerprintPrefix)) {
        if (header_seen) return DataLoss(where + ": a second header fingerprint line");
        header_seen = true;
        const std::string fp = line.substr(kFingerprintPrefix.size());
        if (!ledger.fingerprint.empty() && fp != ledger.fingerprint) {
          return FailedPrecondition("ledger '" + path + "' has fingerprint " + fp +
                                    ", other files " + ledger.fingerprint);
        }
        ledger.fingerprint = fp;
        continue;
      }
      if (line.starts_with(kConfigPrefix)) {
        const std::string config = line.substr(kConfigPrefix.size());
        if (pending) {
          pending->canonical_config = config;
          auto [it, inserted] = amendments.emplace(pending->position, *pending);
          if (!inserted && (it->second.fingerprint != pending->fingerprint ||
                            it->second.canonical_config != config)) {
            return FailedPrecondition(
                where + ": the schedule from position " + std::to_string(pending->position) +
                " is " + pending->fingerprint + ", another file's is " + it->second.fingerprint);
          }
          pending.reset();
        } else {
          ledger.canonical_config = config;
        }
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
        return DataLoss(where + ": a torn or malformed token hash '" + hash + "'");
      }
      if (got != 9) {
        return DataLoss(where + ": expected 9 tab-separated fields, got '" + line + "'");
      }
      r.token_xxh3 = std::strtoull(hash, nullptr, 16);
      ledger.entries.push_back({r, path, n, rank, segment, segment_line});
    }
    if (pending) return DataLoss("ledger '" + path + "' ends in a schedule line");
  }
  if (ledger.canonical_config.empty()) return DataLoss("ledger '" + dir + "' has no # config line");
  ledger.schedules.push_back({0, ledger.fingerprint, ledger.canonical_config});
  for (auto& [position, schedule] : amendments) ledger.schedules.push_back(std::move(schedule));
  return ledger;
}

}  // namespace gridfeed::audit
