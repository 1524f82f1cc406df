#include "offline_writer.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"

namespace gridfeed::app {

Status WriteOfflineOutput(const order::OfflineOutput& output, const std::string& dir) {
  for (const auto& w : output.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::set<std::string> folders = {dir};
  for (const auto& a : output.arrays) {
    folders.insert(std::filesystem::path(dir + "/" + a.path).parent_path().string());
  }
  for (const auto& f : folders) GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(f));
  // Two threads: each copies into the page cache and syncs its own file, so two overlap.
  const auto& arrays = output.arrays;
  std::vector<Status> statuses(arrays.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < arrays.size();) {
      const auto& a = arrays[i];
      statuses[i] = io::WriteNpy(dir + "/" + a.path, a.descr, a.shape, a.data, a.size_bytes);
    }
  };
  {
    std::jthread other(worker);
    worker();
  }
  for (const auto& st : statuses) GRIDFEED_RETURN_IF_ERROR(st);
  for (const auto& t : output.texts) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(dir + "/" + t.path, t.json));
  }
  std::string line = output.summary;
  if (const size_t at = line.find("{out}"); at != std::string::npos) line.replace(at, 5, dir);
  std::printf("%s\n", line.c_str());
  return Status::Ok();
}

}  // namespace gridfeed::app
