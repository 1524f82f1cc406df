// The files of a mid-level dataset's tables (Megatron's cache layout) and their early writing:
// each table goes to an ArraySink as soon as the build has made it final, on a thread of its
// own, while the build goes on (GptTablesConfig::table_final).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/gpt_tables.h"
#include "gridfeed/order/offline_output.h"

namespace gridfeed::order {

// Table `which` of `t` as the file Megatron's builder caches under `dir` ("train/mid_0/").
// `owner` keeps the entries alive. `release_as_written`: its pages are given back as a writer
// writes them (OutputArray::written), through the memory alone (the GptTables may move).
OutputArray MidArray(const std::string& dir, const GptTables& t, GptTable which,
                     std::shared_ptr<const void> owner, bool release_as_written);

// Writes of tables started as they are final; each mid-level dataset's are waited for by
// Finish, which its on_mid_built calls before the tables can go (the tables' memory must
// outlive the writes). Start and Finish are thread safe.
class EarlyTableWrites {
 public:
  explicit EarlyTableWrites(ArraySink* sink) : sink_(sink) {}
  ~EarlyTableWrites();
  EarlyTableWrites(const EarlyTableWrites&) = delete;
  EarlyTableWrites& operator=(const EarlyTableWrites&) = delete;

  // Puts table `which` of `t` (final, unchanged at its address until Finish for this dataset)
  // to the sink as "{dir}" + its file name, on a new thread; where none can be had, nothing
  // (Finish says it was not written). `read_after`: the build still reads it, so its pages stay.
  void Start(int split, size_t k, const std::string& dir, GptTable which, const GptTables& t,
             bool read_after) noexcept;
  // Waits for dataset (split, k)'s writes: the first error, and in `written` which tables
  // went (indexed by GptTable).
  Status Finish(int split, size_t k, bool written[3]);

 private:
  struct Write {
    int split;
    size_t k;
    GptTable table;
    std::thread thread;  // always started: a write without a thread is not recorded
    std::shared_ptr<Status> status;
  };
  ArraySink* const sink_;
  std::mutex mu_;
  std::list<Write> writes_;
};

}  // namespace gridfeed::order
