#include "offline_writer.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "gridfeed/core/log.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/io/publish_all.h"

namespace gridfeed::app {

Status WriteOfflineOutput(const order::OfflineOutput& output, const std::string& dir) {
  for (const auto& w : output.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::set<std::string> folders = {dir};
  for (const auto& a : output.arrays) {
    folders.insert(std::filesystem::path(dir + "/" + a.path).parent_path().string());
  }
  // A folder per dataset: spread over the disk (see MakeDirsSpread).
  for (const auto& f : folders) GRIDFEED_RETURN_IF_ERROR(io::MakeDirsSpread(f));
  const auto t0 = std::chrono::steady_clock::now();
  // Two threads copy the arrays into the page cache as unsynced temporaries; PublishAll then
  // syncs them together and renames them (one fsync per file costs a journal commit each).
  const auto& arrays = output.arrays;
  // Each temporary keeps its descriptor until its fsync; where the limit on open files does not
  // allow that many, each file is synced as soon as it is written (slower, as safe).
  const size_t count = arrays.size() + output.texts.size();
  const bool sync_each = io::OpenFileRoom(count) < count;
  std::vector<std::optional<Result<io::TempFile>>> written(arrays.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < arrays.size();) {
      const auto& a = arrays[i];
      const auto start = std::chrono::steady_clock::now();
      Result<io::TempFile> r =
          io::WriteNpyTemp(dir + "/" + a.path, a.descr, a.shape, a.data, a.size_bytes);
      if (r.ok() && log::Enabled(log::Level::kDebug)) {
        char line[96];
        std::snprintf(
            line, sizeof(line), ": %.1f MB in %.3f s", static_cast<double>(a.size_bytes) / 1e6,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        log::Debug("wrote " + a.path + line);
      }
      if (sync_each && r.ok()) {
        if (Status st = r->Close(); !st.ok()) {
          written[i].emplace(st);
          continue;
        }
      }
      written[i].emplace(std::move(r));
    }
  };
  {
    std::jthread other(worker);
    worker();
  }
  std::vector<io::TempFile> files;
  files.reserve(arrays.size() + output.texts.size());
  for (auto& w : written) {
    GRIDFEED_RETURN_IF_ERROR(w->status());
    files.push_back(std::move(**w));
  }
  for (const auto& t : output.texts) {
    const std::span<const std::byte> parts[] = {std::as_bytes(std::span(t.json))};
    GRIDFEED_ASSIGN_OR_RETURN(io::TempFile f, io::WriteTemp(dir + "/" + t.path, parts));
    files.push_back(std::move(f));
  }
  const auto t1 = std::chrono::steady_clock::now();
  GRIDFEED_RETURN_IF_ERROR(io::PublishAll(files));
  const auto t2 = std::chrono::steady_clock::now();
  size_t bytes = 0;
  for (const auto& a : arrays) bytes += a.size_bytes;
  char timing[160];
  std::snprintf(timing, sizeof(timing),
                "wrote %zu files, %.1f MB: write %.3f s, sync and publish %.3f s", files.size(),
                static_cast<double>(bytes) / 1e6, std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count());
  log::Info(timing);
  std::string line = output.summary;
  if (const size_t at = line.find("{out}"); at != std::string::npos) line.replace(at, 5, dir);
  std::printf("%s\n", line.c_str());
  return Status::Ok();
}

}  // namespace gridfeed::app
