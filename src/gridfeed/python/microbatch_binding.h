// gridfeed.MicroBatch: one micro-batch as Python sees it (a read-only mapping of the
// pipeline's field names to NumPy views over the buffers it owns). Made by gridfeed.Feeder's
// next() (feeder_binding.h); thread safe (immutable after construction).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "gridfeed/feed/feeder.h"

namespace gridfeed::python {

// One micro-batch as Python sees it: a read-only mapping of Megatron's field names to NumPy
// views over the buffers this object owns.
class PyMicroBatch {
 public:
  explicit PyMicroBatch(feed::MicroBatch mb) : mb_(std::move(mb)) {}

  // The keys this rank's stage received: its pipeline's schema fields, in the schema's order.
  std::vector<const char*> Keys() const {
    std::vector<const char*> keys;
    for (const feed::FieldArray& f : mb_.fields) keys.push_back(f.spec->name);
    return keys;
  }

  // A view of field `key` whose base is `self` (this object), with the schema's dtype and
  // this rank's shape; nullopt when absent.
  std::optional<pybind11::array> Field(pybind11::handle self, const std::string& key) const {
    const feed::FieldArray* f = mb_.Find(key);
    if (f == nullptr) return std::nullopt;
    std::vector<pybind11::ssize_t> shape(f->shape.begin(), f->shape.end());
    const std::byte* data = mb_.payload.data() + f->offset;
    return pybind11::array(pybind11::dtype(order::NumpyDescr(f->spec->dtype)), std::move(shape),
                           data, self);
  }

  pybind11::array SampleIndices(pybind11::handle self) const {
    return View(self, mb_.sample_indices,
                {static_cast<pybind11::ssize_t>(mb_.sample_indices.size())});
  }
  pybind11::array SamplePositions(pybind11::handle self) const {
    return View(self, mb_.sample_positions,
                {static_cast<pybind11::ssize_t>(mb_.sample_positions.size())});
  }
  pybind11::array SourceIds(pybind11::handle self) const {
    return View(self, mb_.source_ids, {static_cast<pybind11::ssize_t>(mb_.source_ids.size())});
  }
  pybind11::array CuSeqlens(pybind11::handle self) const {
    if (auto v = Field(self, std::string(order::kCuSeqlens))) return *v;
    return pybind11::array_t<int32_t>(std::vector<pybind11::ssize_t>{0});
  }
  const feed::MicroBatch& mb() const { return mb_; }

 private:
  template <typename T>
  static pybind11::array View(pybind11::handle self, const std::vector<T>& v,
                              std::vector<pybind11::ssize_t> shape) {
    if (v.empty()) return pybind11::array_t<T>(shape);  // nothing to view (middle stage)
    return pybind11::array(pybind11::dtype::of<T>(), std::move(shape), v.data(), self);
  }
  feed::MicroBatch mb_;
};

// Registers gridfeed.MicroBatch (a collections.abc.Mapping) in `m`.
void RegisterMicroBatch(pybind11::module_& m);

}  // namespace gridfeed::python
