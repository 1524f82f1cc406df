// What one sample is, for the ledger and the audit: its top-level position, which blend source
// and sample served it, where it starts in the corpus and a hash of its tokens. The feeder and
// the offline audit build records with the same function, so they cannot disagree by
// construction of the code, only by data. Pure; thread safe.
#pragma once

#include <cstdint>
#include <span>

#include "gridfeed/order/gpt_tables.h"

namespace gridfeed::order {

struct SampleRecord {
  int64_t iteration = 0;
  int64_t micro_batch = 0;  // within the iteration
  int64_t dp_rank = 0;
  int64_t position = 0;  // global sample position in the split's top-level dataset
  int64_t dataset = 0;   // blend source (0 without a blend)
  int64_t dataset_sample = 0;
  int64_t first_document = 0;  // sequence id where the sample starts
  int64_t first_offset = 0;    // token offset in it
  uint64_t token_xxh3 = 0;     // XXH3-64 of the sample's int64 tokens as delivered

  bool operator==(const SampleRecord&) const = default;
};

// The token hash of a record: XXH3-64 of the int64 tokens.
uint64_t TokenDigest(std::span<const int64_t> tokens);

// `tables` are the tables of source `dataset`; `tokens` the whole sample's tokens as
// AssembleSample gives them, hashed into token_xxh3 unless empty (token_xxh3 stays 0).
SampleRecord MakeSampleRecord(int64_t position, int dataset, int64_t dataset_sample,
                              const GptTablesView& tables, std::span<const int64_t> tokens);

}  // namespace gridfeed::order
