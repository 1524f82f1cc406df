// One OLMo instance as MemMapDataset.__getitem__ builds it, and the helpers behind its fields:
// get_document_lengths, find_periodic_sequences (by the equivalent linear scan of the design
// note, section 7.3) and the repetition filter. Pure; thread safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/olmo_token_files.h"

namespace gridfeed::order {

// Lengths of the documents in x (each EOS ends one; a trailing piece without EOS is one more).
// InvalidArgument for an empty x (OLMo raises IndexError).
Result<std::vector<int32_t>> DocumentLengths(std::span<const int64_t> x, int64_t eos_id);

struct PeriodicRun {
  int64_t start = 0, end = 0, period = 0, times = 0;
  bool operator==(const PeriodicRun&) const = default;
};
// find_periodic_sequences(x, max_period, min_period) in OLMo's yield order (period ascending,
// then start). InvalidArgument if x contains -1 (OLMo's mask value).
Result<std::vector<PeriodicRun>> FindPeriodicSequences(std::span<const int64_t> x,
                                                       int64_t max_period, int64_t min_period);

struct InstanceFilter {  // InstanceFilterConfig; OLMo's defaults
  int64_t repetition_max_period = 13;
  int64_t repetition_min_period = 1;
  int64_t repetition_max_count = 32;
};
// _validate_instance: false iff some reported run has times >= repetition_max_count.
bool InstanceOk(std::span<const int64_t> x, const InstanceFilter& filter);

struct OlmoItemOptions {
  std::optional<int64_t> pad_token_id;
  std::optional<int64_t> eos_token_id;
  bool generate_attention_mask = false;
  bool generate_doc_lengths = false;
  std::optional<InstanceFilter> instance_filter;
};

// dataset[i]'s fields (the optional ones empty when not configured).
struct OlmoItem {
  int64_t index = 0;                    // the instance (after a negative i was resolved)
  std::vector<int64_t> input_ids;       // [chunk]
  std::optional<bool> instance_mask;    // with a filter: true = kept
  std::vector<uint8_t> label_mask;      // [chunk] with label-mask files
  std::vector<int64_t> attention_mask;  // [chunk] 0 where input_ids == pad id
  std::vector<int32_t> doc_lens;        // with generate_doc_lengths
};

// Checks OLMo's constructor rules (attention mask needs a pad id, doc lengths an EOS id).
Status CheckItemOptions(const OlmoItemOptions& options);
// dataset[i]: i < 0 counts from the end; OutOfRange "<i> is out of bounds for dataset of size
// <len>" as OLMo's IndexError.
Result<OlmoItem> GetOlmoItem(const io::OlmoTokenFiles& files, int64_t i,
                             const OlmoItemOptions& options);

}  // namespace gridfeed::order
