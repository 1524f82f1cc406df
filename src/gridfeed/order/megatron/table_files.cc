#include "gridfeed/order/megatron/table_files.h"

#include <exception>
#include <list>
#include <utility>

namespace gridfeed::order {

namespace {

template <typename T>
OutputArray ArrayOf(std::string path, const PageArray<T>& a, std::vector<int64_t> shape,
                    std::shared_ptr<const void> owner, bool release_as_written) {
  OfflineOutput out;
  out.AddView(std::move(path), a, std::move(shape), std::move(owner));
  OutputArray array = std::move(out.arrays.back());
  if (release_as_written) {
    array.written = [data = a.data()](size_t bytes) { PageArray<T>::ReleaseFrontOf(data, bytes); };
  }
  return array;
}

}  // namespace

OutputArray MidArray(const std::string& dir, const GptTables& t, GptTable which,
                     std::shared_ptr<const void> owner, bool release_as_written) {
  const bool r = release_as_written;
  switch (which) {
    case GptTable::kDocumentIndex:
      return ArrayOf(dir + "document_index.npy", t.document_index, {}, std::move(owner), r);
    case GptTable::kSampleIndex: {
      const std::vector<int64_t> shape = {t.num_samples() + 1, 2};
      return t.sample_index_is_int64
                 ? ArrayOf(dir + "sample_index.npy", t.sample_index64, shape, std::move(owner), r)
                 : ArrayOf(dir + "sample_index.npy", t.sample_index32, shape, std::move(owner), r);
    }
    case GptTable::kShuffleIndex:
      return t.shuffle_index_is_int64
                 ? ArrayOf(dir + "shuffle_index.npy", t.shuffle_index64, {}, std::move(owner), r)
                 : ArrayOf(dir + "shuffle_index.npy", t.shuffle_index32, {}, std::move(owner), r);
  }
  GRIDFEED_CHECK(false);
  return {};
}

EarlyTableWrites::~EarlyTableWrites() {
  // Unreached with writes left: every dataset whose tables were told final reaches its
  // on_mid_built, which calls Finish (DatasetConfig). Joined all the same, never detached.
  for (Write& w : writes_) {
    if (w.thread.joinable()) w.thread.join();
  }
}

void EarlyTableWrites::Start(int split, size_t k, const std::string& dir, GptTable which,
                             const GptTables& t, bool read_after) noexcept {
  // Everything that can fail comes before the write starts: a write not started is not
  // recorded, and the dataset's on_mid_built writes that table itself (Finish says so).
  std::list<Write> one;
  try {
    auto status = std::make_shared<Status>();
    one.push_back(Write{split, k, which, {}, status});
    OutputArray array = MidArray(dir, t, which, nullptr, /*release_as_written=*/!read_after);
    array.sync_at_once = true;  // its flush overlaps the build too
    auto put = [sink = sink_, status](const OutputArray& a) noexcept {
      try {
        *status = sink->Put(a);
      } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
        *status = Internal("writing '" + a.path + "': " + e.what());
      }
    };
    // The last step: a thread that cannot be had (std::system_error) leaves the write to
    // on_mid_built, not to this thread (the drawing thread, which the applier waits on).
    one.back().thread = std::thread([put, a = std::move(array)] { put(a); });
  } catch (const std::exception&) {
    return;  // not started (the thread, if any, started only as the last step)
  }
  std::lock_guard<std::mutex> lock(mu_);
  writes_.splice(writes_.end(), one);
}

Status EarlyTableWrites::Finish(int split, size_t k, bool written[3]) {
  std::list<Write> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = writes_.begin(); it != writes_.end();) {
      const auto next = std::next(it);
      if (it->split == split && it->k == k) mine.splice(mine.end(), writes_, it);
      it = next;
    }
  }
  Status first;
  for (int i = 0; i < 3; ++i) written[i] = false;
  for (Write& w : mine) {
    if (w.thread.joinable()) w.thread.join();
    if (w.status->ok()) {
      written[static_cast<int>(w.table)] = true;
    } else if (first.ok()) {
      first = *w.status;
    }
  }
  return first;
}

}  // namespace gridfeed::order
