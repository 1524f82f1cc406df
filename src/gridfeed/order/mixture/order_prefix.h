// Whether two Megatron-format orders (table views, e.g. a schedule and its amendment) read the
// same samples at the first n positions of the train split: the same source prefix and sample
// length and the same token range (first and last document and offsets) at every position,
// whichever table number serves it (an amendment that adds a (length, source) table renumbers
// the later ones). Pure; thread safe.
#pragma once

#include <cstdint>
#include <string>

#include "gridfeed/order/table_view.h"

namespace gridfeed::order {

// -1 when positions [0, n) agree (both long enough), else the first position that differs.
int64_t FirstDifference(const TableView& a, const TableView& b, int64_t n);

// Epochs a source's tables hold: document index entries per document of its range (Megatron
// shuffles every epoch's documents together, so another count reshuffles the source).
int64_t TableEpochs(const SourceView& s);

}  // namespace gridfeed::order
