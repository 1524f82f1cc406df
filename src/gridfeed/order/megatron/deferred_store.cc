#include "gridfeed/order/megatron/deferred_store.h"

#include "gridfeed/io/mapped_fault.h"

namespace gridfeed::order {

const io::IndexedDataset& DeferredStore::Open() const {
  std::call_once(once_, [this] {
    auto ds = io::IndexedDataset::Open(prefix_, false, io::IndexCheck::kStructure,
                                       /*digest=*/false);
    if (!ds.ok()) {
      io::EndJobOnChangedStore("token store '" + prefix_ +
                               "' changed under the job (start-up proved it, its first read " +
                               "cannot open it): " + ds.status().ToString());
    }
    store_ = std::make_unique<const io::IndexedDataset>(std::move(ds).value());
    ready_.store(store_.get(), std::memory_order_release);
  });
  return *ready_.load(std::memory_order_acquire);
}

}  // namespace gridfeed::order
