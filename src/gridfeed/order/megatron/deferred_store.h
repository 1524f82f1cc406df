// A token store a reader opens at its first read instead of at start-up. Start-up proved that
// its files are the very files world rank 0 (or the node leader) opened with every check
// (order/store_facts.h), so opening checks only their structure, and a reader of a 1,000-file
// blend opens the stores its reads touch when they touch them, not 2,000 files before its first
// micro-batch. A store that cannot be opened then was removed or changed under the job: as for a
// fault on a mapped store (io/mapped_fault.h), the job ends with a message naming it.
//
// Thread safety: Get() may be called from any number of threads; the first opens, the others
// wait for it. The store lives as long as this object.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "gridfeed/io/indexed_dataset.h"

namespace gridfeed::order {

class DeferredStore {
 public:
  explicit DeferredStore(std::string prefix) : prefix_(std::move(prefix)) {}
  DeferredStore(const DeferredStore&) = delete;
  DeferredStore& operator=(const DeferredStore&) = delete;

  // The open store; opens it on the first call (or ends the job, see above).
  const io::IndexedDataset& Get() const {
    if (const io::IndexedDataset* s = ready_.load(std::memory_order_acquire)) return *s;
    return Open();
  }
  bool opened() const { return ready_.load(std::memory_order_acquire) != nullptr; }
  const std::string& prefix() const { return prefix_; }

 private:
  const io::IndexedDataset& Open() const;

  std::string prefix_;
  mutable std::once_flag once_;
  mutable std::unique_ptr<const io::IndexedDataset> store_;
  mutable std::atomic<const io::IndexedDataset*> ready_{nullptr};
};

// What a view reads a source from: a store open since start-up, or one opened at first read.
struct BoundStore {
  const io::IndexedDataset* open = nullptr;
  const DeferredStore* deferred = nullptr;
  const io::IndexedDataset& get() const { return open != nullptr ? *open : deferred->Get(); }
};

}  // namespace gridfeed::order
