#include "gridfeed/order/sample_record.h"

#include <xxhash.h>

namespace gridfeed::order {

SampleRecord MakeSampleRecord(int64_t position, int dataset, int64_t dataset_sample,
                              const GptTablesView& t, const std::vector<int64_t>* tokens) {
  SampleRecord r;
  r.position = position;
  r.dataset = dataset;
  r.dataset_sample = dataset_sample;
  const int64_t j = t.ShuffleAt(dataset_sample);
  r.first_document = t.document_index[static_cast<size_t>(t.SampleDoc(j))];
  r.first_offset = t.SampleOffset(j);
  if (tokens) r.token_xxh3 = XXH3_64bits(tokens->data(), tokens->size() * sizeof(int64_t));
  return r;
}

}  // namespace gridfeed::order
