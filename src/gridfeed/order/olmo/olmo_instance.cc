#include "gridfeed/order/olmo/olmo_instance.h"

#include <algorithm>

namespace gridfeed::order {

Result<std::vector<int32_t>> DocumentLengths(std::span<const int64_t> x, int64_t eos_id) {
  if (x.empty()) return InvalidArgument("document lengths of an empty instance");
  std::vector<int32_t> out;
  int64_t last = -1;  // boundary before the first document
  const int64_t n = static_cast<int64_t>(x.size());
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == eos_id) {  // an EOS ends its document and counts in it
      out.push_back(static_cast<int32_t>(i - last));
      last = i;
    }
  }
  if (last != n - 1) out.push_back(static_cast<int32_t>(n - 1 - last));
  return out;
}

namespace {

// Calls emit(run) for every maximal run [a, b) of positions i >= p with x[i] == x[i-p] whose
// stretch [a-p, b) holds at least three periods (design note, section 7.3: the same output as
// OLMo's reshape-and-compare, in the same order). emit returns false to stop early.
template <typename Emit>
bool ScanPeriod(std::span<const int64_t> x, int64_t p, Emit&& emit) {
  const int64_t n = static_cast<int64_t>(x.size());
  int64_t i = p;
  while (i < n) {
    if (x[i] != x[i - p]) {
      ++i;
      continue;
    }
    const int64_t a = i;
    while (i < n && x[i] == x[i - p]) ++i;
    const int64_t times = (i - a + p) / p;
    if (times >= 3) {
      PeriodicRun run;
      run.start = a - p;
      run.end = i;
      run.period = p;
      run.times = times;
      if (!emit(run)) return false;
    }
  }
  return true;
}

}  // namespace

Result<std::vector<PeriodicRun>> FindPeriodicSequences(std::span<const int64_t> x,
                                                       int64_t max_period, int64_t min_period) {
  if (std::find(x.begin(), x.end(), int64_t{-1}) != x.end()) {
    return InvalidArgument("find_periodic_sequences: the array contains -1, OLMo's mask value");
  }
  if (min_period < 1) {
    return InvalidArgument("find_periodic_sequences: min_period must be >= 1, got " +
                           std::to_string(min_period));
  }
  std::vector<PeriodicRun> out;
  const int64_t top = std::min(max_period, static_cast<int64_t>(x.size()) / 3);
  for (int64_t p = min_period; p <= top; ++p) {
    ScanPeriod(x, p, [&out](const PeriodicRun& r) {
      out.push_back(r);
      return true;
    });
  }
  return out;
}

bool InstanceOk(std::span<const int64_t> x, const InstanceFilter& filter) {
  const int64_t top = std::min(filter.repetition_max_period, static_cast<int64_t>(x.size()) / 3);
  for (int64_t p = std::max<int64_t>(filter.repetition_min_period, 1); p <= top; ++p) {
    const bool finished = ScanPeriod(
        x, p, [&filter](const PeriodicRun& r) { return r.times < filter.repetition_max_count; });
    if (!finished) return false;
  }
  return true;
}

Status CheckItemOptions(const OlmoItemOptions& options) {
  if (options.generate_attention_mask && !options.pad_token_id.has_value()) {
    return InvalidArgument("generate_attention_mask needs a pad token id (model.pad_token_id)");
  }
  if (options.generate_doc_lengths && !options.eos_token_id.has_value()) {
    return InvalidArgument("generate_doc_lengths needs an EOS token id (model.eos_token_id)");
  }
  return Status::Ok();
}

Result<OlmoItem> GetOlmoItem(const io::OlmoTokenFiles& files, int64_t i,
                             const OlmoItemOptions& options) {
  GRIDFEED_RETURN_IF_ERROR(CheckItemOptions(options));
  const int64_t len = files.size();
  const int64_t index = i < 0 ? len + i : i;
  if (index < 0 || index >= len) {
    return OutOfRange(std::to_string(i) + " is out of bounds for dataset of size " +
                      std::to_string(len));
  }
  OlmoItem item;
  item.index = index;
  const size_t chunk = static_cast<size_t>(files.chunk_size());
  item.input_ids.resize(chunk);
  files.ReadInstance(index, item.input_ids);
  if (options.instance_filter.has_value()) {
    item.instance_mask = InstanceOk(item.input_ids, *options.instance_filter);
  }
  if (files.has_label_masks()) {
    item.label_mask.resize(chunk);
    files.ReadLabelMask(index, item.label_mask);
  }
  if (options.generate_attention_mask) {
    item.attention_mask.resize(chunk);
    for (size_t t = 0; t < chunk; ++t) {
      item.attention_mask[t] = item.input_ids[t] == *options.pad_token_id ? 0 : 1;
    }
  }
  if (options.generate_doc_lengths) {
    GRIDFEED_ASSIGN_OR_RETURN(item.doc_lens,
                              DocumentLengths(item.input_ids, *options.eos_token_id));
  }
  return item;
}

}  // namespace gridfeed::order
