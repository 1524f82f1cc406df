#include "gridfeed/order/sample_record.h"

#include <xxhash.h>

namespace gridfeed::order {

SampleRecord MakeSampleRecord(int64_t position, int dataset, int64_t dataset_sample,
                              const GptTablesView& t, std::span<const int64_t> tokens) {
  SampleRecord r;
  r.position = position;
  r.dataset = dataset;
  r.dataset_sample = dataset_sample;
  const int64_t j = t.ShuffleAt(dataset_sample);
  r.first_document = t.document_index[static_cast<size_t>(t.SampleDoc(j))];
  r.first_offset = t.SampleOffset(j);
  if (!tokens.empty()) r.token_xxh3 = TokenDigest(tokens);
  return r;
}

uint64_t TokenDigest(std::span<const int64_t> tokens) {
  return XXH3_64bits(tokens.data(), tokens.size_bytes());
}

}  // namespace gridfeed::order
