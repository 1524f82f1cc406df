#include "sft_outputs.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/sft/sft_dataset.h"
#include "positions.h"

namespace gridfeed::app {
namespace {

Result<std::unique_ptr<order::sft::SftDataset>> OpenSft(const config::JobOptions& o) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, order::sft::SftDataset::Open(o));
  for (const auto& w : ds->layout().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return ds;
}

}  // namespace

Status WriteSftTables(const config::JobOptions& o, const std::string& out) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, OpenSft(o));
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(out));
  nlohmann::json summary = nlohmann::json::object();
  for (int i = 0; i < 3; ++i) {
    const std::string name = order::kSplitNames[i];
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
      const std::string dir = out + "/" + name + "/blend";
      GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(dir));
      std::vector<int16_t> index(s->blend.dataset_index.begin(), s->blend.dataset_index.end());
      GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(dir + "/dataset_index.npy", index));
      GRIDFEED_RETURN_IF_ERROR(
          io::WriteNpy(dir + "/dataset_sample_index.npy", s->blend.dataset_sample_index));
    }
  }
  GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(out + "/summary.json", summary.dump(2) + "\n"));
  std::printf("tables: wrote %s (see summary.json)\n", out.c_str());
  return Status::Ok();
}

Status WriteSftSamples(const config::JobOptions& o, order::Split split,
                       const std::string& positions, const std::string& out) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ds, OpenSft(o));
  const std::string name = order::kSplitNames[static_cast<int>(split)];
  if (ds->length(split) == 0) return FailedPrecondition("split " + name + " is empty");
  GRIDFEED_ASSIGN_OR_RETURN(const std::vector<int64_t> pos,
                            ParsePositions(positions, ds->length(split)));
  const int64_t L = ds->seq_length();
  std::vector<int64_t> tokens, labels, position_ids, row_index;
  std::vector<float> loss_mask;
  std::vector<int32_t> cu_seqlens, max_seqlen;
  std::vector<int16_t> dataset_id;
  for (int64_t p : pos) {
    order::sft::SftSource source;
    GRIDFEED_ASSIGN_OR_RETURN(const order::sft::PackedSample s, ds->Read(split, p, &source));
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
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(out));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/items_index.npy", pos));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/tokens.npy", tokens, {n, L}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/labels.npy", labels, {n, L}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/loss_mask.npy", loss_mask, {n, L}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/position_ids.npy", position_ids, {n, L}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/cu_seqlens.npy", cu_seqlens, {n, L + 1}));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/max_seqlen.npy", max_seqlen));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/row_index.npy", row_index));
  if (ds->is_blend(split)) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/dataset_id.npy", dataset_id));
  }
  std::printf("samples: wrote %lld packed SFT samples of %s to %s\n", static_cast<long long>(n),
              name.c_str(), out.c_str());
  return Status::Ok();
}

}  // namespace gridfeed::app
