#include "olmo_outputs.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gridfeed/core/parse.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo_instance.h"
#include "gridfeed/order/olmo_pipeline.h"

namespace gridfeed::app {
namespace {

int TokenSize(const config::DataOptions& d) { return d.olmo_memmap_dtype == "uint32" ? 4 : 2; }

// Every index is checked against the dataset's length before anything is allocated.
Result<std::vector<int64_t>> ParseInstances(const std::string& spec, int64_t length) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::stringstream ss(spec);
  std::string part;
  auto num = [](const std::string& s) -> Result<int64_t> {
    const auto v = ParseInt64(s);
    if (!v) return InvalidArgument("--positions: '" + s + "' is not an integer");
    return *v;
  };
  int64_t total = 0;
  while (std::getline(ss, part, ',')) {
    const size_t colon = part.find(':');
    int64_t a = 0, b = 0;
    if (colon == std::string::npos) {
      GRIDFEED_ASSIGN_OR_RETURN(a, num(part));
      if (a < 0) a += length;  // dataset[-1] is the last instance, as in OLMo
      b = a + 1;
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(a, num(part.substr(0, colon)));
      GRIDFEED_ASSIGN_OR_RETURN(b, num(part.substr(colon + 1)));
      if (a < 0 || b <= a) return InvalidArgument("--positions: bad range '" + part + "'");
    }
    if (a < 0 || b > length) {
      return OutOfRange("--positions: '" + part + "' is out of bounds for a dataset of " +
                        std::to_string(length) + " instances");
    }
    total += b - a;
    if (total > (int64_t{1} << 24)) return InvalidArgument("--positions: at most 2^24 instances");
    ranges.push_back({a, b});
  }
  std::vector<int64_t> out;
  for (const auto& [a, b] : ranges) {
    for (int64_t v = a; v < b; ++v) out.push_back(v);
  }
  return out;
}

}  // namespace

Status WriteOlmoTables(const config::JobOptions& options, const std::string& out) {
  config::JobOptions o = options;
  o.run.train_iters = 1;  // the configured epoch only
  GRIDFEED_ASSIGN_OR_RETURN(order::OlmoPlan plan, order::PlanOlmoOrder(o));
  const order::SeedWords seed =
      order::AddToSeed(plan.seed, static_cast<uint64_t>(plan.first_epoch));
  const std::vector<uint32_t> global =
      order::OlmoGlobalIndices(plan.instances, seed, /*shuffle=*/true, plan.sizes);
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(out));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/global_indices.npy", global));
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : plan.files) {
    files.push_back({{"path", f.path},
                     {"bytes", f.bytes},
                     {"tokens", f.tokens},
                     {"instances", f.instances},
                     {"offsets", {f.start, f.start + f.instances}},
                     {"dropped_tail_tokens", f.dropped_tail_tokens}});
  }
  const nlohmann::json summary = {{"dataset_len", plan.instances},
                                  {"world_size", plan.world_size},
                                  {"seed", order::SeedText(plan.seed)},
                                  {"epoch", plan.first_epoch},
                                  {"shuffle_seed", order::SeedText(seed)},
                                  {"drop_last", plan.drop_last},
                                  {"num_samples", plan.sizes.num_samples},
                                  {"total_size", plan.sizes.total_size},
                                  {"global_batch_size", plan.global_batch_size},
                                  {"device_batch_size", plan.sizes.device_batch_size},
                                  {"chunk_size", o.data.seq_length},
                                  {"memmap_dtype", o.data.olmo_memmap_dtype},
                                  {"files", files}};
  GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(out + "/summary.json", summary.dump(2) + "\n"));
  std::printf("tables: wrote %s/global_indices.npy (%lld instances, DP %lld) and summary.json\n",
              out.c_str(), static_cast<long long>(global.size()),
              static_cast<long long>(plan.world_size));
  return Status::Ok();
}

Status WriteOlmoSamples(const config::JobOptions& o, const std::string& spec,
                        const std::string& out) {
  const auto& d = o.data;
  GRIDFEED_ASSIGN_OR_RETURN(
      io::OlmoTokenFiles files,
      io::OlmoTokenFiles::Open(d.olmo_paths, d.olmo_label_mask_paths, TokenSize(d), d.seq_length));
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<int64_t> index, ParseInstances(spec, files.size()));
  order::OlmoItemOptions io;
  if (d.pad_id >= 0) io.pad_token_id = d.pad_id;
  io.eos_token_id = d.eod_id;
  io.generate_attention_mask = d.olmo_generate_attention_mask;
  io.generate_doc_lengths = d.olmo_generate_doc_lengths;
  if (d.olmo_instance_filter) {
    order::InstanceFilter f;
    f.repetition_max_period = d.olmo_repetition_max_period;
    f.repetition_min_period = d.olmo_repetition_min_period;
    f.repetition_max_count = d.olmo_repetition_max_count;
    io.instance_filter = f;
  }
  GRIDFEED_RETURN_IF_ERROR(order::CheckItemOptions(io));
  std::vector<int64_t> input_ids, attention_mask, doc_offsets = {0};
  std::vector<uint8_t> label_mask, instance_mask;
  std::vector<int32_t> doc_lens;
  nlohmann::json metadata = nlohmann::json::array();
  for (int64_t i : index) {
    GRIDFEED_ASSIGN_OR_RETURN(order::OlmoItem item, order::GetOlmoItem(files, i, io));
    input_ids.insert(input_ids.end(), item.input_ids.begin(), item.input_ids.end());
    label_mask.insert(label_mask.end(), item.label_mask.begin(), item.label_mask.end());
    attention_mask.insert(attention_mask.end(), item.attention_mask.begin(),
                          item.attention_mask.end());
    if (item.instance_mask) instance_mask.push_back(*item.instance_mask ? 1 : 0);
    doc_lens.insert(doc_lens.end(), item.doc_lens.begin(), item.doc_lens.end());
    doc_offsets.push_back(static_cast<int64_t>(doc_lens.size()));
    const size_t file = static_cast<size_t>(files.FileOf(item.index));
    metadata.push_back(d.olmo_path_labels.empty()
                           ? nlohmann::json{{"path", d.olmo_paths[file]}}
                           : nlohmann::json{{"label", d.olmo_path_labels[file]}});
  }
  const int64_t n = static_cast<int64_t>(index.size()), L = d.seq_length;
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(out));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/index.npy", index));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/input_ids.npy", input_ids, {n, L}));
  if (files.has_label_masks()) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/label_mask.npy", label_mask, {n, L}));
  }
  if (io.generate_attention_mask) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/attention_mask.npy", attention_mask, {n, L}));
  }
  if (io.instance_filter) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/instance_mask.npy", instance_mask));
  }
  if (io.generate_doc_lengths) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/doc_lens_flat.npy", doc_lens));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/doc_lens_offsets.npy", doc_offsets));
  }
  GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(out + "/metadata.json", metadata.dump(1) + "\n"));
  std::printf("samples: wrote %lld OLMo instances to %s\n", static_cast<long long>(n), out.c_str());
  return Status::Ok();
}

}  // namespace gridfeed::app
