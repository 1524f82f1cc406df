#include "gridfeed/order/olmo/olmo_outputs.h"

#include <nlohmann/json.hpp>

#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_instance.h"
#include "gridfeed/order/olmo/olmo_pipeline.h"

namespace gridfeed::order {

Result<OlmoTables> BuildOlmoTables(const config::JobOptions& options) {
  config::JobOptions o = options;
  o.run.train_iters = 1;  // the configured epoch only
  o.resume.consumed_samples = 0;
  GRIDFEED_ASSIGN_OR_RETURN(OlmoPlan plan, PlanOlmoOrder(o));
  const SeedWords seed = AddToSeed(plan.seed, static_cast<uint64_t>(plan.first_epoch));
  OlmoTables t;
  t.global_indices = OlmoGlobalIndices(plan.instances, seed, /*shuffle=*/true, plan.sizes);
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : plan.files) {
    files.push_back({{"path", f.path},
                     {"bytes", f.bytes},
                     {"tokens", f.tokens},
                     {"instances", f.instances},
                     {"offsets", {f.start, f.start + f.instances}},
                     {"dropped_tail_tokens", f.dropped_tail_tokens}});
  }
  t.summary_json = nlohmann::json{
      {"dataset_len", plan.instances},
      {"world_size", plan.world_size},
      {"seed", SeedText(plan.seed)},
      {"epoch", plan.first_epoch},
      {"shuffle_seed", SeedText(seed)},
      {"drop_last", plan.drop_last},
      {"num_samples", plan.sizes.num_samples},
      {"total_size", plan.sizes.total_size},
      {"global_batch_size", plan.global_batch_size},
      {"device_batch_size", plan.sizes.device_batch_size},
      {"chunk_size", o.data.seq_length},
      {"memmap_dtype", o.data.olmo_memmap_dtype},
      {"files", files}}.dump(2);
  return t;
}

Result<OlmoItems> ReadOlmoItems(const config::JobOptions& o, const std::vector<int64_t>& indices) {
  const auto& d = o.data;
  GRIDFEED_ASSIGN_OR_RETURN(io::OlmoTokenFiles files,
                            io::OlmoTokenFiles::Open(d.olmo_paths, d.olmo_label_mask_paths,
                                                     OlmoTokenSize(d), d.seq_length));
  const int64_t n = files.size();
  for (int64_t i : indices) {  // before anything is allocated
    if (i >= n || i < -n) {
      return OutOfRange(std::to_string(i) + " is out of bounds for dataset of size " +
                        std::to_string(n));
    }
  }
  const OlmoItemOptions io = OlmoItemOptionsOf(d);
  GRIDFEED_RETURN_IF_ERROR(CheckItemOptions(io));
  OlmoItems out;
  out.seq_length = d.seq_length;
  out.has_label_mask = files.has_label_masks();
  out.has_attention_mask = io.generate_attention_mask;
  out.has_instance_mask = io.instance_filter.has_value();
  out.has_doc_lens = io.generate_doc_lengths;
  nlohmann::json metadata = nlohmann::json::array();
  for (int64_t i : indices) {
    GRIDFEED_ASSIGN_OR_RETURN(OlmoItem item, GetOlmoItem(files, i, io));
    out.index.push_back(item.index);
    out.input_ids.insert(out.input_ids.end(), item.input_ids.begin(), item.input_ids.end());
    out.label_mask.insert(out.label_mask.end(), item.label_mask.begin(), item.label_mask.end());
    out.attention_mask.insert(out.attention_mask.end(), item.attention_mask.begin(),
                              item.attention_mask.end());
    if (item.instance_mask) out.instance_mask.push_back(*item.instance_mask ? 1 : 0);
    out.doc_lens_flat.insert(out.doc_lens_flat.end(), item.doc_lens.begin(), item.doc_lens.end());
    out.doc_lens_offsets.push_back(static_cast<int64_t>(out.doc_lens_flat.size()));
    const size_t file = static_cast<size_t>(files.FileOf(item.index));
    metadata.push_back(d.olmo_path_labels.empty()
                           ? nlohmann::json{{"path", d.olmo_paths[file]}}
                           : nlohmann::json{{"label", d.olmo_path_labels[file]}});
  }
  out.metadata_json = metadata.dump(1);
  return out;
}

}  // namespace gridfeed::order
