#include "gridfeed/order/sample.h"

#include "gridfeed/order/sample_fields.h"

namespace gridfeed::order {

void AssembleSample(const io::IndexedDataset& ds, const GptTablesView& t, int64_t index,
                    const SampleOptions& o, Sample* out) {
  const auto S = static_cast<size_t>(o.seq_length);
  out->tokens.resize(S);
  out->labels.resize(S);
  out->loss_mask.resize(S);
  out->position_ids.resize(S);
  if (o.create_attention_mask) {
    out->attention_mask.resize(S * S);
  } else {
    out->attention_mask.clear();
  }
  FieldTargets f;
  f.tokens = out->tokens.data();
  f.labels = out->labels.data();
  f.loss_mask = out->loss_mask.data();
  f.position_ids = out->position_ids.data();
  f.attention_mask = out->attention_mask.empty() ? nullptr : out->attention_mask.data();
  // Per thread, so callers keep a plain Sample and no call allocates once it has grown.
  thread_local AssemblyScratch scratch;
  AssembleFields(ds, t, index, o, f, &scratch);
}

}  // namespace gridfeed::order
