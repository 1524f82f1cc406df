// The straightforward sample assembly gridfeed shipped before order/sample_fields.h: every
// field of the whole sample in separate passes. Kept, unchanged in behaviour, as the reference
// the fast path is compared with (tests) and measured against (tests/bench/assembly_bench).
// Pure; thread safe (each call writes only its `out`).
#pragma once

#include "gridfeed/order/sample.h"

namespace gridfeed::testing {

void ReferenceAssembleSample(const io::IndexedDataset& dataset, const order::GptTablesView& tables,
                             int64_t index, const order::SampleOptions& options,
                             order::Sample* out);

}  // namespace gridfeed::testing
