// Writes what a pipeline's offline function produced (order/offline_output.h) into a folder:
// `gridfeed tables` and `gridfeed samples` for every pipeline.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/publish_all.h"
#include "gridfeed/order/offline_output.h"

namespace gridfeed::app {

// The files of one output folder. Arrays handed to Put while the pipeline still builds are
// written at once as unpublished temporaries (their writeback overlapping the build, and
// their sync too where OutputArray::sync_at_once asks); Finish writes the rest, then syncs
// every file not yet synced and publishes them together. Until Finish succeeds
// nothing is published: the destructor removes the temporaries and the folders it made that
// are still empty. Put is thread safe; Finish is called once, after the last Put returned.
class OfflineWriter final : public order::ArraySink {
 public:
  explicit OfflineWriter(std::string dir);
  ~OfflineWriter() override;
  OfflineWriter(const OfflineWriter&) = delete;
  OfflineWriter& operator=(const OfflineWriter&) = delete;

  Status Put(const order::OutputArray& array) override;
  // Put of each array; from kPutAllTwoThreadsFrom bytes in all, on the calling thread and one
  // more (a dataset's tables are written while no other build may keep a core busy).
  Status PutAll(std::span<const order::OutputArray> arrays) override;
  static constexpr size_t kPutAllTwoThreadsFrom = size_t{16} << 20;

  // Warnings to stderr first; every array of `output` as .npy and every text (arrays on two
  // threads), then every file synced and published; then the output's summary line with
  // {out} replaced by the folder. The first error, naming the file.
  Status Finish(const order::OfflineOutput& output);

 private:
  Status EnsureFolderOf(const std::string& relative);  // REQUIRES: mu_ held
  Result<io::TempFile> WriteArray(const order::OutputArray& a, bool sync_now);

  const std::string dir_;
  std::mutex mu_;
  std::vector<io::TempFile> files_;          // written, not yet published
  std::vector<std::string> made_;            // folders this writer created, in creation order
  std::unordered_set<std::string> ensured_;  // folders known to exist
  Status failed_;                            // the first failed Put: later ones return it
  // Descriptors: at most limit_ held at once (io::OpenFileRoom), kept_open_ by written
  // temporaries that keep theirs until published, in_flight_ by writes under way.
  size_t limit_ = 1, spare_ = 1, kept_open_ = 0, in_flight_ = 0;
  std::condition_variable room_freed_;
  size_t early_bytes_ = 0;
  bool finished_ = false;
};

// OfflineWriter(dir).Finish(output).
Status WriteOfflineOutput(const order::OfflineOutput& output, const std::string& dir);

}  // namespace gridfeed::app
