#include "gridfeed/order/fim/fim_outputs.h"

#include <string>
#include <vector>

#include "gridfeed/order/fim/fim_dataset.h"
#include "gridfeed/order/fim/fim_pipeline.h"
#include "gridfeed/order/megatron/megatron_outputs.h"
#include "gridfeed/order/registry.h"

namespace gridfeed::order::fim {
namespace {

Result<OfflineOutput> Samples(const config::JobOptions& o, const PositionRequest& request) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, FimDataset::Open(o));
  const std::string& name = o.feed.split_name;
  const Split split = SplitNamed(name);
  if (ds->length(split) == 0) return FailedPrecondition("split " + name + " is empty");
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<int64_t> pos, request.Resolve(ds->length(split)));
  const int64_t L = ds->seq_length();
  // With inter-document masking GPTDataset replaces the mask by cu_seqlens/max_seqlen
  // (megatron-algorithms.md section 5 step 7).
  const bool documents = o.data.dataloader_inter_document_masking;
  const bool mask = o.data.create_attention_mask && !documents;
  std::vector<int64_t> tokens, labels, position_ids, window;
  std::vector<float> loss_mask;
  std::vector<uint8_t> masks;
  std::vector<int32_t> cu_seqlens, max_seqlen;
  std::vector<int16_t> dataset_id;
  Sample s;
  FimSource source;
  bool full_windows = true;
  for (int64_t p : pos) {
    GRIDFEED_RETURN_IF_ERROR(ds->Read(split, p, &s, &source));
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    labels.insert(labels.end(), s.labels.begin(), s.labels.end());
    loss_mask.insert(loss_mask.end(), s.loss_mask.begin(), s.loss_mask.end());
    position_ids.insert(position_ids.end(), s.position_ids.begin(), s.position_ids.end());
    if (mask) masks.insert(masks.end(), s.attention_mask.begin(), s.attention_mask.end());
    if (documents) {
      cu_seqlens.insert(cu_seqlens.end(), s.cu_seqlens.begin(), s.cu_seqlens.end());
      max_seqlen.push_back(s.max_seqlen);
    }
    dataset_id.push_back(static_cast<int16_t>(source.dataset));
    full_windows = full_windows && static_cast<int64_t>(source.window.size()) == L + 1;
    window.insert(window.end(), source.window.begin(), source.window.end());
  }
  const auto n = static_cast<int64_t>(pos.size());
  OfflineOutput out;
  out.Add("items_index.npy", std::move(pos));
  out.Add("tokens.npy", std::move(tokens), {n, L});
  out.Add("labels.npy", std::move(labels), {n, L});
  out.Add("loss_mask.npy", std::move(loss_mask), {n, L});
  out.Add("position_ids.npy", std::move(position_ids), {n, L});
  if (mask) out.Add("attention_mask.npy", std::move(masks), {n, 1, L, L});
  if (documents) {
    out.Add("cu_seqlens.npy", std::move(cu_seqlens), {n, L + 1});
    out.Add("max_seqlen.npy", std::move(max_seqlen));
  }
  if (ds->is_blend(split)) out.Add("dataset_id.npy", std::move(dataset_id));
  if (full_windows) {  // a debug aid (a partial last sample's window is shorter)
    out.Add("window_before_fim.npy", std::move(window), {n, L + 1});
  }
  out.summary = "samples: wrote " + std::to_string(n) + " FIM samples of " + name + " to {out}";
  return out;
}

Result<std::unique_ptr<Pipeline>> Make(const config::JobOptions& o) {
  if (o.data.dataloader_inter_document_masking) {
    // Its cu_seqlens per sample are not in the GPT schema yet; GPT fields alone would be
    // silently other data.
    return InvalidArgument(
        "--fim-data with --dataloader-inter-document-masking: feeding its per-sample "
        "cu_seqlens is not built yet (`gridfeed samples` writes them)");
  }
  return MakeFimPipeline(o);
}

}  // namespace

const PipelineKind& FimKind() {
  static constexpr PipelineKind kKind = {
      .name = "fim",
      .selects = [](const config::DataOptions& d) { return d.is_fim(); },
      .make = Make,
      .seq_lengths = nullptr,
      .tables = MegatronTables,
      .no_tables = nullptr,
      .samples = Samples,
      // Its samples are GPT windows re-encoded on text: the GPT memcpy floor is not theirs.
      .floor = nullptr,
      .table_bytes = nullptr,
      .no_bench =
          "bench: --fim-data has no assembly floor yet; `gridfeed run --fim-data` prints "
          "its steady-state rate per reader",
      .plan = nullptr,
      .no_plan =
          "plan: the configuration has no mixture schedule (the keys sources and "
          "schedule); plan prints a schedule's arithmetic",
  };
  return kKind;
}

}  // namespace gridfeed::order::fim
