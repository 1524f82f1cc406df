#include "gridfeed/order/table_view.h"

#include <algorithm>

#include "gridfeed/order/dataset_builder.h"

namespace gridfeed::order {

TableView ViewOf(const BuiltDatasets& built) {
  TableView out;
  for (int i = 0; i < 3; ++i) {
    if (!built.splits[i]) continue;
    const SplitDataset& sd = *built.splits[i];
    SplitView s;
    s.blended = sd.blended;
    s.length = sd.length;
    if (sd.blended) {
      s.weights = sd.weights;
      s.dataset_index = sd.blend.dataset_index;
      s.dataset_sample_index = sd.blend.dataset_sample_index;
    }
    for (const auto& m : sd.mids) {
      s.sources.push_back({m.prefix, m.begin, m.end, m.tables.num_samples_per_epoch, m.seq_length,
                           m.tables.View()});
      if (std::find(out.prefixes.begin(), out.prefixes.end(), m.prefix) == out.prefixes.end()) {
        out.prefixes.push_back(m.prefix);
      }
    }
    out.splits[i] = std::move(s);
  }
  return out;
}

}  // namespace gridfeed::order
