#include "gridfeed/order/sft/sft_outputs.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/core/memory_usage.h"
#include "gridfeed/order/registry.h"
#include "gridfeed/order/sft/sft_dataset.h"
#include "gridfeed/order/sft/sft_pipeline.h"

namespace gridfeed::order::sft {
namespace {

Result<std::unique_ptr<SftDataset>> Open(const config::JobOptions& o, OfflineOutput* out) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, SftDataset::Open(o));
  out->warnings = ds->layout().warnings;
  return ds;
}

Result<OfflineOutput> Tables(const config::JobOptions& o, ArraySink* /*early: unused*/) {
  OfflineOutput out;
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, Open(o, &out));
  nlohmann::json summary = nlohmann::json::object();
  for (int i = 0; i < 3; ++i) {
    const std::string name = kSplitNames[i];
    const auto& s = ds->layout().splits[i];
    if (!s) {
      summary[name] = nullptr;
      continue;
    }
    nlohmann::json mids = nlohmann::json::array();
    for (const auto& m : s->mids) {
      mids.push_back({{"dataset_path", m.path},
                      {"row_index_range", {m.begin, m.end}},
                      {"num_samples", m.num_samples}});
    }
    summary[name] = {{"type", s->blended ? "BlendedDataset" : "SFTDataset"},
                     {"length", s->length},
                     {"mid", mids}};
    if (s->blended) {
      summary[name]["weights"] = s->weights;
      std::vector<int16_t> index(s->blend.dataset_index.begin(), s->blend.dataset_index.end());
      out.Add(name + "/blend/dataset_index.npy", std::move(index));
      std::vector<int64_t> sample_index(s->blend.dataset_sample_index.begin(),
                                        s->blend.dataset_sample_index.end());
      out.Add(name + "/blend/dataset_sample_index.npy", std::move(sample_index));
    }
  }
  out.texts.push_back({"summary.json", summary.dump(2) + "\n", /*spread=*/true});
  out.summary = "tables: wrote {out} (see summary.json)";
  return out;
}

Result<OfflineOutput> Samples(const config::JobOptions& o, const PositionRequest& request) {
  OfflineOutput out;
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, Open(o, &out));
  const std::string& name = o.feed.split_name;
  const Split split = SplitNamed(name);
  if (ds->length(split) == 0) return FailedPrecondition("split " + name + " is empty");
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<int64_t> pos, request.Resolve(ds->length(split)));
  const int64_t L = ds->seq_length();
  // The arrays below and each sample's own: tokens, labels and position ids (8 bytes each),
  // loss mask and cu_seqlens (4 each), twice over (the sample, then its copy here).
  GRIDFEED_RETURN_IF_ERROR(CheckMemoryFor(
      2.0 * 32.0 * static_cast<double>(L + 1) * static_cast<double>(pos.size()),
      "--seq-length " + std::to_string(L) + " for " + std::to_string(pos.size()) + " samples",
      "; give a smaller --seq-length or fewer --positions"));
  std::vector<int64_t> tokens, labels, position_ids, row_index;
  std::vector<float> loss_mask;
  std::vector<int32_t> cu_seqlens, max_seqlen;
  std::vector<int16_t> dataset_id;
  for (int64_t p : pos) {
    SftSource source;
    GRIDFEED_ASSIGN_OR_RETURN(const PackedSample s, ds->Read(split, p, &source));
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    labels.insert(labels.end(), s.labels.begin(), s.labels.end());
    loss_mask.insert(loss_mask.end(), s.loss_mask.begin(), s.loss_mask.end());
    position_ids.insert(position_ids.end(), s.position_ids.begin(), s.position_ids.end());
    cu_seqlens.insert(cu_seqlens.end(), s.cu_seqlens.begin(), s.cu_seqlens.end());
    max_seqlen.push_back(s.max_seqlen);
    row_index.push_back(source.row);
    dataset_id.push_back(static_cast<int16_t>(source.dataset));
  }
  const auto n = static_cast<int64_t>(pos.size());
  out.Add("items_index.npy", std::move(pos));
  out.Add("tokens.npy", std::move(tokens), {n, L});
  out.Add("labels.npy", std::move(labels), {n, L});
  out.Add("loss_mask.npy", std::move(loss_mask), {n, L});
  out.Add("position_ids.npy", std::move(position_ids), {n, L});
  out.Add("cu_seqlens.npy", std::move(cu_seqlens), {n, L + 1});
  out.Add("max_seqlen.npy", std::move(max_seqlen));
  out.Add("row_index.npy", std::move(row_index));
  if (ds->is_blend(split)) out.Add("dataset_id.npy", std::move(dataset_id));
  out.summary =
      "samples: wrote " + std::to_string(n) + " packed SFT samples of " + name + " to {out}";
  return out;
}

Result<std::unique_ptr<Pipeline>> Make(const config::JobOptions& o) { return MakeSftPipeline(o); }

}  // namespace

const PipelineKind& SftKind() {
  static constexpr PipelineKind kKind = {
      .name = "sft",
      .selects = [](const config::DataOptions& d) { return d.is_sft(); },
      .make = Make,
      .seq_lengths = nullptr,
      .tables = Tables,
      .no_tables = nullptr,
      .samples = Samples,
      // Its assembly floor (the same bytes read by the plainest code) is not defined for packed
      // conversations: refused rather than measured against a floor of another order.
      .floor = nullptr,
      .table_bytes = nullptr,
      .no_bench =
          "bench: --sft has no assembly floor yet; `gridfeed run --sft` prints its "
          "steady-state rate per reader",
      .plan = nullptr,
      .no_plan =
          "plan: the configuration has no mixture schedule (the keys sources and "
          "schedule); plan prints a schedule's arithmetic",
  };
  return kKind;
}

}  // namespace gridfeed::order::sft
