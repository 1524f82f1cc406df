// What the offline tools give for an order (`gridfeed tables`, `gridfeed samples` and the
// Python module's tables()/samples()): named arrays and JSON texts that a pipeline produces
// (registry.h) and the tools write or hand over without knowing the pipeline.
//
// An OfflineOutput owns its arrays (each array shares ownership of the storage it points
// into); it is thread-compatible and holds no handle to a file or communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/core/page_array.h"
#include "gridfeed/core/status.h"
#include "gridfeed/io/npy.h"

namespace gridfeed::order {

// One .npy file of the output. `path` is relative to the output folder, with '/' between
// folders ("train/mid_0/document_index.npy"); the Python module turns it into nested keys
// ("mid_K" into element K of a list "mid").
struct OutputArray {
  std::string path;
  std::string descr;  // numpy descr, e.g. "<i8"
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t size_bytes = 0;
  std::shared_ptr<const void> owner;  // keeps `data` alive
  // Where set, a writer tells it how many leading bytes of `data` it has written (the page
  // cache holds them), a piece at a time: the owner may give their pages back, so the file's
  // pages reuse the table's (no first touch of fresh memory; rank 0's peak stays one copy).
  std::function<void(size_t bytes)> written;
  // A writer that can syncs this file as soon as it is written rather than with the others
  // at the end: for an array handed over while the build goes on, whose flush to the disk
  // (on a virtual disk, the host's) then overlaps the rest of the build.
  bool sync_at_once = false;
};

// One JSON file. `spread`: its top-level keys are the Python result's own keys (a summary
// per split); otherwise the Python result holds it under the file's stem.
struct OutputText {
  std::string path;
  std::string json;
  bool spread = false;
};

struct OfflineOutput {
  std::vector<OutputArray> arrays;
  std::vector<OutputText> texts;
  std::vector<std::string> warnings;  // printed to stderr (Python: warnings.warn)
  std::string summary;                // the command's last line, "{out}" is the folder

  // `values` moved into the output.
  template <typename T>
  void Add(std::string path, std::vector<T>&& values, std::vector<int64_t> shape = {}) {
    auto held = std::make_shared<const std::vector<T>>(std::move(values));
    const std::span<const T> s(*held);
    AddView(std::move(path), s, std::move(shape), std::move(held));
  }
  // `values` kept alive by `owner`.
  template <typename T>
  void AddView(std::string path, std::span<const T> values, std::vector<int64_t> shape,
               std::shared_ptr<const void> owner) {
    if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
    arrays.push_back({std::move(path),
                      io::NpyDescr<T>(),
                      std::move(shape),
                      values.data(),
                      values.size_bytes(),
                      std::move(owner),
                      {},
                      false});
  }
  template <typename T>
  void AddView(std::string path, const PageArray<T>& values, std::vector<int64_t> shape,
               std::shared_ptr<const void> owner) {
    AddView(std::move(path), std::span<const T>(values), std::move(shape), std::move(owner));
  }
  template <typename T>
  void AddView(std::string path, const std::vector<T>& values, std::vector<int64_t> shape,
               std::shared_ptr<const void> owner) {
    AddView(std::move(path), std::span<const T>(values), std::move(shape), std::move(owner));
  }
};

// Where a pipeline may hand arrays while it still builds (`gridfeed tables` writes each one at
// once, overlapping the writes with the rest of the build). Put is called from any thread,
// concurrently; the array's data need only live for the call. An array handed here is not in
// the returned output's `arrays`. An error fails the build.
class ArraySink {
 public:
  virtual ~ArraySink() = default;
  virtual Status Put(const OutputArray& array) = 0;
  // The arrays of one dataset, together: by default Put each in order; a sink may write
  // them concurrently. The first error.
  virtual Status PutAll(std::span<const OutputArray> arrays) {
    for (const OutputArray& a : arrays) GRIDFEED_RETURN_IF_ERROR(Put(a));
    return Status::Ok();
  }
};

// Which positions `samples` reads: the command's text ("0:64,100,4000", ranges exclusive) or
// a list (Python). `who` begins every message ("--positions", "gridfeed.samples").
struct PositionRequest {
  std::string text;
  std::optional<std::vector<int64_t>> list;
  std::string who = "--positions";

  // Every position in [0, length), checked before anything is allocated: InvalidArgument for
  // a malformed or negative entry, OutOfRange for one at or beyond `length`.
  Result<std::vector<int64_t>> Resolve(int64_t length) const;
};

}  // namespace gridfeed::order
