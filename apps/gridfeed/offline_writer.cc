#include "offline_writer.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "gridfeed/core/log.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"

namespace gridfeed::app {

namespace {

// More temporaries than this keep no descriptor: each is synced as soon as it is written
// (slower, as safe). io::OpenFileRoom raises the soft limit towards it where it can.
constexpr size_t kWantedOpenFiles = size_t{1} << 16;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Calls work(i) for every i < n on the calling thread and one more (all here where no thread
// can be had). `work` must not throw.
void OnTwoThreads(size_t n, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) work(i);
  };
  std::jthread other;
  try {
    other = std::jthread(worker);
  } catch (const std::system_error&) {
  }
  worker();
}

}  // namespace

Result<std::unique_ptr<OfflineWriter>> OfflineWriter::Create(const std::string& out, bool replace) {
  namespace fs = std::filesystem;
  if (out.empty()) return InvalidArgument("--out: an output folder is needed");
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      return FailedPrecondition("--out '" + out + "' exists and is not a folder");
    }
    fs::directory_iterator it(out, ec);
    if (ec) return IoError("--out '" + out + "': cannot list it: " + ec.message());
    if (it != fs::directory_iterator() && !replace) {
      return FailedPrecondition(
          "--out '" + out + "' is not empty (it holds '" + it->path().filename().string() +
          "'); pass --replace to replace the folder as a whole, or choose an empty or new one");
    }
  }
  // The staging folder beside the output: the same file system, so one rename swaps it in.
  fs::path target = fs::path(out).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);  // as the folders inside it are made
  if (!fs::is_directory(parent, ec)) {
    return IoError("--out '" + out + "': cannot make its parent folder '" + parent.string() + "'" +
                   (ec ? ": " + ec.message() : std::string()));
  }
  const std::string staging = (parent / ("." + target.filename().string() + ".gridfeed-staging." +
                                         std::to_string(::getpid())))
                                  .string();
  fs::remove_all(staging, ec);  // a stale one of a killed run with this pid
  if (::mkdir(staging.c_str(), 0777) != 0) {
    return IoError("cannot make the staging folder '" + staging + "' for --out '" + out +
                   "': " + std::strerror(errno));
  }
  return std::unique_ptr<OfflineWriter>(new OfflineWriter(out, staging));
}

OfflineWriter::OfflineWriter(std::string out, std::string staging)
    : out_(std::move(out)),
      dir_(std::move(staging)),
      limit_(std::max<size_t>(io::OpenFileRoom(kWantedOpenFiles), 1)) {
  // Descriptors kept for writes in flight: a temporary is kept open only below limit_ - spare_.
  spare_ = std::clamp<size_t>(limit_ / 2, 1, 16);
}

OfflineWriter::~OfflineWriter() {
  if (finished_) return;
  for (io::TempFile& f : files_) f.Discard();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);  // this writer's own staging folder, nothing else
}

Status OfflineWriter::SwapIn() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string parent = fs::path(dir_).parent_path().string();
  if (!fs::exists(out_, ec)) {
    if (::rename(dir_.c_str(), out_.c_str()) != 0) {
      return IoError("cannot publish '" + out_ + "' (rename of '" + dir_ +
                     "'): " + std::strerror(errno));
    }
  } else {
    // One atomic swap: readers see the old folder or the new one. The old one then sits
    // under the staging name and is removed.
    if (::renameat2(AT_FDCWD, dir_.c_str(), AT_FDCWD, out_.c_str(), RENAME_EXCHANGE) != 0) {
      if (errno != EINVAL && errno != ENOSYS) {
        return IoError("cannot publish '" + out_ + "' (exchange with '" + dir_ +
                       "'): " + std::strerror(errno));
      }
      // A file system without the exchange: the old folder moves aside first, so the output
      // is briefly absent, never mixed.
      const std::string aside = dir_ + ".old";
      if (::rename(out_.c_str(), aside.c_str()) != 0 || ::rename(dir_.c_str(), out_.c_str()) != 0) {
        return IoError("cannot publish '" + out_ + "' (rename): " + std::strerror(errno));
      }
      fs::remove_all(aside, ec);
    } else {
      fs::remove_all(dir_, ec);
    }
    if (ec) log::Warn("could not remove the replaced output under '" + dir_ + "': " + ec.message());
  }
  return io::TempFile::SyncDir(parent.empty() ? "." : parent);
}

Status OfflineWriter::EnsureFolderOf(const std::string& relative) {
  namespace fs = std::filesystem;
  const std::string folder = fs::path(dir_ + "/" + relative).parent_path().string();
  if (ensured_.count(folder) != 0) return Status::Ok();
  // A folder per dataset: spread over the disk (io::MakeDirsSpread).
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirsSpread(folder, &made_));
  ensured_.insert(folder);
  return Status::Ok();
}

Result<io::TempFile> OfflineWriter::WriteArray(const order::OutputArray& a, bool sync_now) {
  const auto start = std::chrono::steady_clock::now();
  GRIDFEED_ASSIGN_OR_RETURN(io::TempFile f, io::WriteNpyTemp(dir_ + "/" + a.path, a.descr, a.shape,
                                                             a.data, a.size_bytes, a.written));
  if (sync_now) GRIDFEED_RETURN_IF_ERROR(f.Close());
  if (log::Enabled(log::Level::kDebug)) {
    char line[96];
    std::snprintf(line, sizeof(line), ": %.1f MB in %.3f s",
                  static_cast<double>(a.size_bytes) / 1e6, SecondsSince(start));
    log::Debug("wrote " + a.path + line);
  }
  return f;
}

Status OfflineWriter::Put(const order::OutputArray& array) {
  bool sync_now;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_;  // the build is failing: nothing more to write
    failed_ = EnsureFolderOf(array.path);
    if (!failed_.ok()) return failed_;
    // Every descriptor this writer holds (kept temporaries and writes in flight) stays within
    // limit_; near it, a write syncs and closes its file at once.
    room_freed_.wait(lock, [&] { return kept_open_ + in_flight_ < limit_; });
    sync_now = array.sync_at_once || kept_open_ + in_flight_ + 1 > limit_ - spare_;
    ++in_flight_;
  }
  Result<io::TempFile> f = WriteArray(array, sync_now);
  std::lock_guard<std::mutex> lock(mu_);
  --in_flight_;
  room_freed_.notify_one();
  if (!f.ok()) {
    if (failed_.ok()) failed_ = f.status();
    return f.status();
  }
  if (f->fd() >= 0) ++kept_open_;
  files_.push_back(std::move(*f));
  early_bytes_ += array.size_bytes;
  return Status::Ok();
}

Status OfflineWriter::PutAll(std::span<const order::OutputArray> arrays) {
  size_t bytes = 0;
  for (const auto& a : arrays) bytes += a.size_bytes;
  if (arrays.size() < 2 || bytes < kPutAllTwoThreadsFrom) return ArraySink::PutAll(arrays);
  std::vector<Status> put(arrays.size());
  OnTwoThreads(arrays.size(), [&](size_t i) {
    try {
      put[i] = Put(arrays[i]);
    } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
      put[i] = Internal("writing '" + arrays[i].path + "': " + e.what());
    }
  });
  for (const Status& s : put) GRIDFEED_RETURN_IF_ERROR(s);
  return Status::Ok();
}

Status OfflineWriter::Finish(const order::OfflineOutput& output) {
  for (const auto& w : output.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const size_t early = files_.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    GRIDFEED_RETURN_IF_ERROR(EnsureFolderOf("summary"));  // the folder itself, even if empty
    for (const auto& a : output.arrays) GRIDFEED_RETURN_IF_ERROR(EnsureFolderOf(a.path));
    for (const auto& t : output.texts) GRIDFEED_RETURN_IF_ERROR(EnsureFolderOf(t.path));
  }
  const auto t0 = std::chrono::steady_clock::now();
  // Two threads copy the arrays into the page cache as unsynced temporaries; PublishAll then
  // syncs them together and renames them (one fsync per file costs a journal commit each).
  const auto& arrays = output.arrays;
  // Two writers below, each with a descriptor in flight.
  const size_t open_room = limit_ > kept_open_ + 2 ? limit_ - kept_open_ - 2 : 0;
  const bool sync_each = open_room < arrays.size() + output.texts.size();
  std::vector<std::optional<Result<io::TempFile>>> written(arrays.size());
  OnTwoThreads(arrays.size(), [&](size_t i) {
    try {
      written[i].emplace(WriteArray(arrays[i], sync_each));
    } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
      written[i].emplace(Internal("writing '" + arrays[i].path + "': " + e.what()));
    }
  });
  for (auto& w : written) {
    GRIDFEED_RETURN_IF_ERROR(w->status());
    files_.push_back(std::move(**w));
  }
  for (const auto& t : output.texts) {
    const std::span<const std::byte> parts[] = {std::as_bytes(std::span(t.json))};
    GRIDFEED_ASSIGN_OR_RETURN(io::TempFile f, io::WriteTemp(dir_ + "/" + t.path, parts));
    files_.push_back(std::move(f));
  }
  const double write_s = SecondsSince(t0);
  const auto t1 = std::chrono::steady_clock::now();
  GRIDFEED_RETURN_IF_ERROR(io::PublishAll(files_));
  GRIDFEED_RETURN_IF_ERROR(SwapIn());
  finished_ = true;
  size_t bytes = early_bytes_;
  for (const auto& a : arrays) bytes += a.size_bytes;
  char timing[200];
  std::snprintf(timing, sizeof(timing),
                "wrote %zu files (%zu during the build), %.1f MB: write after the build %.3f s, "
                "sync and publish %.3f s",
                files_.size(), early, static_cast<double>(bytes) / 1e6, write_s, SecondsSince(t1));
  log::Info(timing);
  std::string line = output.summary;
  if (const size_t at = line.find("{out}"); at != std::string::npos) line.replace(at, 5, out_);
  std::printf("%s\n", line.c_str());
  return Status::Ok();
}

Status WriteOfflineOutput(const order::OfflineOutput& output, const std::string& dir,
                          bool replace) {
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<OfflineWriter> writer,
                            OfflineWriter::Create(dir, replace));
  return writer->Finish(output);
}

}  // namespace gridfeed::app
