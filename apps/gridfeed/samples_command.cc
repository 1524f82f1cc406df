// gridfeed samples: assemble chosen top-level positions of one split, as Megatron's
// dataset[pos] would return them, into .npy files.
#include <memory>

#include "commands.h"
#include "fim_outputs.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/core/parse.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/pipeline.h"
#include "olmo_outputs.h"
#include "positions.h"
#include "sft_outputs.h"

namespace gridfeed::app {

Runner RegisterSamples(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("samples", "Assemble samples of one split into .npy files");
  auto flags = std::make_shared<config::OptionFlags>(
      sub, config::Groups{config::Group::kData, config::Group::kGrid, config::Group::kBatch,
                          config::Group::kSplitName});
  auto out = std::make_shared<std::string>();
  auto positions = std::make_shared<std::string>();
  sub->add_option("--out", *out, "Output folder")->required();
  sub->add_option("--positions", *positions, "e.g. 0:64,100,4000")->required();
  return [=]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(config::JobOptions o, flags->Resolve());
    if (o.data.is_olmo()) return WriteOlmoSamples(o, *positions, *out);
    const std::string& name = o.feed.split_name;
    order::Split split = order::Split::kTrain;
    for (int i = 0; i < 3; ++i) {
      if (name == order::kSplitNames[i]) split = static_cast<order::Split>(i);
    }
    if (o.data.is_sft()) return WriteSftSamples(o, split, *positions, *out);
    if (o.data.is_fim()) return WriteFimSamples(o, split, *positions, *out);
    GRIDFEED_ASSIGN_OR_RETURN(auto pipeline, order::Pipeline::For(o));
    GRIDFEED_ASSIGN_OR_RETURN(auto built, pipeline->Build());
    const order::OrderView& view = built->view();
    if (view.length(split) == 0) return FailedPrecondition("split " + name + " is empty");
    GRIDFEED_ASSIGN_OR_RETURN(std::vector<int64_t> pos,
                              ParsePositions(*positions, view.length(split)));
    // One array shape: every position at one length (a mixture stage may set its own).
    GRIDFEED_ASSIGN_OR_RETURN(const order::SeqLengths lengths, order::SeqLengthsOf(o, split));
    GRIDFEED_ASSIGN_OR_RETURN(const int64_t L, lengths.Common(pos));
    std::vector<int64_t> tokens, labels, position_ids;
    std::vector<float> loss_mask;
    std::vector<uint8_t> mask;
    std::vector<int16_t> dataset_id;
    order::Sample sample;
    for (int64_t p : pos) {
      const order::SampleRecord r = view.Read(split, p, &sample, /*hash_tokens=*/false);
      tokens.insert(tokens.end(), sample.tokens.begin(), sample.tokens.end());
      labels.insert(labels.end(), sample.labels.begin(), sample.labels.end());
      position_ids.insert(position_ids.end(), sample.position_ids.begin(),
                          sample.position_ids.end());
      loss_mask.insert(loss_mask.end(), sample.loss_mask.begin(), sample.loss_mask.end());
      mask.insert(mask.end(), sample.attention_mask.begin(), sample.attention_mask.end());
      dataset_id.push_back(static_cast<int16_t>(r.dataset));
    }
    const int64_t n = static_cast<int64_t>(pos.size());
    GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(*out));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/items_index.npy", pos));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/tokens.npy", tokens, {n, L}));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/labels.npy", labels, {n, L}));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/loss_mask.npy", loss_mask, {n, L}));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/position_ids.npy", position_ids, {n, L}));
    if (o.data.create_attention_mask) {
      GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/attention_mask.npy", mask, {n, 1, L, L}));
    }
    if (view.is_blend(split)) {
      GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/dataset_id.npy", dataset_id));
    }
    std::printf("samples: wrote %lld samples of %s to %s\n", static_cast<long long>(n),
                name.c_str(), out->c_str());
    return Status::Ok();
  };
}

}  // namespace gridfeed::app
