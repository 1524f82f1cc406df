#include "gridfeed/order/olmo/olmo_outputs.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "gridfeed/core/parse.h"
#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_floor.h"
#include "gridfeed/order/olmo/olmo_instance.h"
#include "gridfeed/order/olmo/olmo_pipeline.h"
#include "gridfeed/order/registry.h"

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

namespace {

// "A:B" (B exclusive) or single indices (negative: from the end, as OLMo's dataset[i]); at
// most 2^24 of them (bounds are checked by ReadOlmoItems before any read).
Result<std::vector<int64_t>> ParseInstances(const std::string& spec) {
  std::vector<int64_t> out;
  std::stringstream ss(spec);
  std::string part;
  auto num = [](const std::string& s) -> Result<int64_t> {
    const auto v = ParseInt64(s);
    if (!v) return InvalidArgument("--positions: '" + s + "' is not an integer");
    return *v;
  };
  while (std::getline(ss, part, ',')) {
    const size_t colon = part.find(':');
    if (colon == std::string::npos) {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t a, num(part));
      out.push_back(a);
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t a, num(part.substr(0, colon)));
      GRIDFEED_ASSIGN_OR_RETURN(int64_t b, num(part.substr(colon + 1)));
      if (a < 0 || b <= a) return InvalidArgument("--positions: bad range '" + part + "'");
      if (b - a > (int64_t{1} << 24) - static_cast<int64_t>(out.size())) {
        return InvalidArgument("--positions: at most 2^24 instances");
      }
      for (int64_t v = a; v < b; ++v) out.push_back(v);
    }
    if (out.size() > (size_t{1} << 24)) return InvalidArgument("--positions: at most 2^24");
  }
  return out;
}

Result<OfflineOutput> Tables(const config::JobOptions& o, ArraySink* /*early: unused*/) {
  GRIDFEED_ASSIGN_OR_RETURN(OlmoTables t, BuildOlmoTables(o));
  OfflineOutput out;
  const size_t n = t.global_indices.size();
  out.Add("global_indices.npy", std::move(t.global_indices));
  out.texts.push_back({"summary.json", t.summary_json + "\n", /*spread=*/false});
  out.summary =
      "tables: wrote {out}/global_indices.npy (" + std::to_string(n) + " entries) and summary.json";
  return out;
}

Result<OfflineOutput> Samples(const config::JobOptions& o, const PositionRequest& request) {
  std::vector<int64_t> indices;
  if (request.list) {
    indices = *request.list;
  } else {
    GRIDFEED_ASSIGN_OR_RETURN(indices, ParseInstances(request.text));
  }
  GRIDFEED_ASSIGN_OR_RETURN(OlmoItems it, ReadOlmoItems(o, indices));
  const auto n = static_cast<int64_t>(it.index.size());
  const int64_t L = it.seq_length;
  OfflineOutput out;
  out.Add("index.npy", std::move(it.index));
  out.Add("input_ids.npy", std::move(it.input_ids), {n, L});
  if (it.has_label_mask) out.Add("label_mask.npy", std::move(it.label_mask), {n, L});
  if (it.has_attention_mask) out.Add("attention_mask.npy", std::move(it.attention_mask), {n, L});
  if (it.has_instance_mask) out.Add("instance_mask.npy", std::move(it.instance_mask));
  if (it.has_doc_lens) {
    out.Add("doc_lens_flat.npy", std::move(it.doc_lens_flat));
    out.Add("doc_lens_offsets.npy", std::move(it.doc_lens_offsets));
  }
  out.texts.push_back({"metadata.json", it.metadata_json + "\n", /*spread=*/false});
  out.summary = "samples: wrote " + std::to_string(n) + " OLMo instances to {out}";
  return out;
}

Result<std::unique_ptr<Pipeline>> Make(const config::JobOptions& o) { return MakeOlmoPipeline(o); }

}  // namespace

const PipelineKind& OlmoKind() {
  static constexpr PipelineKind kKind = {
      .name = "olmo",
      .selects = [](const config::DataOptions& d) { return d.is_olmo(); },
      .make = Make,
      .seq_lengths = nullptr,
      .tables = Tables,
      .no_tables = nullptr,
      .samples = Samples,
      .floor = OlmoFloor,
      .table_bytes = OlmoTableBytes,
      .no_bench = nullptr,
      .plan = nullptr,
      .no_plan =
          "plan: the configuration has no mixture schedule (the keys sources and "
          "schedule); plan prints a schedule's arithmetic",
  };
  return kKind;
}

}  // namespace gridfeed::order
