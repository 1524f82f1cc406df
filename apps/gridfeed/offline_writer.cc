#include "offline_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
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

OfflineWriter::OfflineWriter(std::string dir)
    : dir_(std::move(dir)), limit_(std::max<size_t>(io::OpenFileRoom(kWantedOpenFiles), 1)) {
  // Descriptors kept for writes in flight: a temporary is kept open only below limit_ - spare_.
  spare_ = std::clamp<size_t>(limit_ / 2, 1, 16);
}

OfflineWriter::~OfflineWriter() {
  if (finished_) return;
  for (io::TempFile& f : files_) f.Discard();
  // Only folders this writer made, deepest first, and only while empty (rmdir fails otherwise).
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());
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
  if (const size_t at = line.find("{out}"); at != std::string::npos) line.replace(at, 5, dir_);
  std::printf("%s\n", line.c_str());
  return Status::Ok();
}

Status WriteOfflineOutput(const order::OfflineOutput& output, const std::string& dir) {
  OfflineWriter writer(dir);
  return writer.Finish(output);
}

}  // namespace gridfeed::app
