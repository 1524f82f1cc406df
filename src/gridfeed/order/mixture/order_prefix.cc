#include "gridfeed/order/mixture/order_prefix.h"

#include <algorithm>
#include <array>

namespace gridfeed::order {
namespace {

// The sample's token range in its source: first document and offset, last document and offset.
std::array<int64_t, 4> RangeOf(const SourceView& s, int64_t j) {
  const int64_t row = s.tables.ShuffleAt(j);
  return {s.tables.document_index[static_cast<size_t>(s.tables.SampleDoc(row))],
          s.tables.SampleOffset(row),
          s.tables.document_index[static_cast<size_t>(s.tables.SampleDoc(row + 1))],
          s.tables.SampleOffset(row + 1)};
}

}  // namespace

int64_t FirstDifference(const TableView& a, const TableView& b, int64_t n) {
  if (!a.splits[0] || !b.splits[0]) return 0;
  const SplitView& x = *a.splits[0];
  const SplitView& y = *b.splits[0];
  const int64_t upto = std::min({n, x.length, y.length});
  for (int64_t p = 0; p < upto; ++p) {
    const auto [kx, jx] = x.Locate(p);
    const auto [ky, jy] = y.Locate(p);
    const SourceView& sx = x.sources[static_cast<size_t>(kx)];
    const SourceView& sy = y.sources[static_cast<size_t>(ky)];
    if (sx.prefix != sy.prefix || sx.seq_length != sy.seq_length || sx.begin != sy.begin ||
        RangeOf(sx, jx) != RangeOf(sy, jy)) {
      return p;
    }
  }
  return upto < n ? upto : -1;
}

int64_t TableEpochs(const SourceView& s) {
  const int64_t docs = std::max<int64_t>(1, s.end - s.begin);
  return static_cast<int64_t>(s.tables.document_index.size()) / docs;
}

}  // namespace gridfeed::order
