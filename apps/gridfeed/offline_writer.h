// Writes what a pipeline's offline function produced (order/offline_output.h) into a folder:
// `gridfeed tables` and `gridfeed samples` for every pipeline.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/publish_all.h"
#include "gridfeed/order/offline_output.h"

namespace gridfeed::app {

// The files of one output folder, published as a whole. Everything is written into a
// sibling staging folder (`.NAME.gridfeed-staging.PID` beside NAME); Finish swaps it in with
// one rename (renameat2 RENAME_EXCHANGE where the output exists), so a reader sees the old
// folder or the new one, never a mix of two runs. An output folder that is not empty is
// refused unless `replace` is set; the old one is then removed after the swap.
// Arrays handed to Put while the pipeline still builds are written at once as unpublished
// temporaries (their writeback overlapping the build, and their sync too where
// OutputArray::sync_at_once asks); Finish writes the rest, syncs every file not yet synced,
// names them in the staging folder and swaps it in. Until Finish succeeds the output is
// untouched: the destructor removes the staging folder. Put is thread safe; Finish is called
// once, after the last Put returned.
class OfflineWriter final : public order::ArraySink {
 public:
  // FailedPrecondition naming `out` and the flag if it is a non-empty folder and !replace, or
  // not a folder; IoError if the staging folder cannot be made.
  static Result<std::unique_ptr<OfflineWriter>> Create(const std::string& out, bool replace);
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
  OfflineWriter(std::string out, std::string staging);
  Status EnsureFolderOf(const std::string& relative);  // REQUIRES: mu_ held
  Status SwapIn();                                     // the staging folder becomes out_
  Result<io::TempFile> WriteArray(const order::OutputArray& a, bool sync_now);

  const std::string out_;
  const std::string dir_;  // the staging folder, where every file is written
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

// OfflineWriter::Create(dir, replace), then Finish(output).
Status WriteOfflineOutput(const order::OfflineOutput& output, const std::string& dir, bool replace);

}  // namespace gridfeed::app
