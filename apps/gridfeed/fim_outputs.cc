#include "fim_outputs.h"

#include <cstdio>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/fim/fim_dataset.h"
#include "positions.h"

namespace gridfeed::app {

Status WriteFimSamples(const config::JobOptions& o, order::Split split,
                       const std::string& positions, const std::string& out) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, order::fim::FimDataset::Open(o));
  const std::string name = order::kSplitNames[static_cast<int>(split)];
  if (ds->length(split) == 0) return FailedPrecondition("split " + name + " is empty");
  GRIDFEED_ASSIGN_OR_RETURN(const std::vector<int64_t> pos,
                            ParsePositions(positions, ds->length(split)));
  const int64_t L = ds->seq_length();
  std::vector<int64_t> tokens, labels, position_ids, window;
  std::vector<float> loss_mask;
  std::vector<uint8_t> mask;
  std::vector<int32_t> cu_seqlens, max_seqlen;
  std::vector<int16_t> dataset_id;
  order::Sample s;
  order::fim::FimSource source;
  bool full_windows = true;
  for (int64_t p : pos) {
    GRIDFEED_RETURN_IF_ERROR(ds->Read(split, p, &s, &source));
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    labels.insert(labels.end(), s.labels.begin(), s.labels.end());
    loss_mask.insert(loss_mask.end(), s.loss_mask.begin(), s.loss_mask.end());
    position_ids.insert(position_ids.end(), s.position_ids.begin(), s.position_ids.end());
    mask.insert(mask.end(), s.attention_mask.begin(), s.attention_mask.end());
    cu_seqlens.insert(cu_seqlens.end(), s.cu_seqlens.begin(), s.cu_seqlens.end());
    max_seqlen.push_back(s.max_seqlen);
    dataset_id.push_back(static_cast<int16_t>(source.dataset));
    full_windows = full_windows && static_cast<int64_t>(source.window.size()) == L + 1;
    window.insert(window.end(), source.window.begin(), source.window.end());
  }
  const auto n = static_cast<int64_t>(pos.size());
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(out));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/items_index.npy", pos));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/tokens.npy", tokens, {n, L}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/labels.npy", labels, {n, L}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/loss_mask.npy", loss_mask, {n, L}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/position_ids.npy", position_ids, {n, L}));
  // With inter-document masking GPTDataset replaces the mask by cu_seqlens/max_seqlen
  // (megatron-algorithms.md section 5 step 7).
  if (o.data.create_attention_mask && !o.data.dataloader_inter_document_masking) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/attention_mask.npy", mask, {n, 1, L, L}));
  }
  if (o.data.dataloader_inter_document_masking) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/cu_seqlens.npy", cu_seqlens, {n, L + 1}));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/max_seqlen.npy", max_seqlen));
  }
  if (ds->is_blend(split)) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/dataset_id.npy", dataset_id));
  }
  if (full_windows) {  // a debug aid (a partial last sample's window is shorter)
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/window_before_fim.npy", window, {n, L + 1}));
  }
  std::printf("samples: wrote %lld FIM samples of %s to %s\n", static_cast<long long>(n),
              name.c_str(), out.c_str());
  return Status::Ok();
}

}  // namespace gridfeed::app
