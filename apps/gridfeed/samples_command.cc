// gridfeed samples: assemble chosen top-level positions of one split, as Megatron's
// dataset[pos] would return them, into .npy files.
#include <memory>
#include <sstream>

#include "commands.h"
#include "data_flags.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"

namespace gridfeed::app {
namespace {

// "0:64,100,4000" -> 0..63, 100, 4000.
Result<std::vector<int64_t>> ParsePositions(const std::string& spec, int64_t length) {
  std::vector<int64_t> out;
  std::stringstream ss(spec);
  std::string part;
  auto num = [&](const std::string& s) -> Result<int64_t> {
    try {
      size_t used = 0;
      int64_t v = std::stoll(s, &used);
      if (used != s.size() || v < 0) throw std::invalid_argument(s);
      return v;
    } catch (...) {
      return InvalidArgument("--positions: '" + s + "' is not a non-negative integer");
    }
  };
  while (std::getline(ss, part, ',')) {
    const size_t colon = part.find(':');
    if (colon == std::string::npos) {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t v, num(part));
      out.push_back(v);
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t a, num(part.substr(0, colon)));
      GRIDFEED_ASSIGN_OR_RETURN(int64_t b, num(part.substr(colon + 1)));
      for (int64_t v = a; v < b; ++v) out.push_back(v);
    }
  }
  for (int64_t p : out) {
    if (p >= length) {
      return OutOfRange("--positions: " + std::to_string(p) + " is beyond the split's " +
                        std::to_string(length) + " samples");
    }
  }
  return out;
}

}  // namespace

Runner RegisterSamples(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("samples", "Assemble samples of one split into .npy files");
  auto flags = std::make_shared<DataFlags>(sub);
  auto out = std::make_shared<std::string>();
  auto split = std::make_shared<std::string>("train");
  auto positions = std::make_shared<std::string>();
  sub->add_option("--out", *out, "Output folder")->required();
  sub->add_option("--split-name", *split, "train, valid or test")->capture_default_str();
  sub->add_option("--positions", *positions, "e.g. 0:64,100,4000")->required();
  return [=]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(config::DataOptions o, flags->Resolve());
    // `--split train|valid|test` names the split here (a split string is never a name).
    if (o.split == "train" || o.split == "valid" || o.split == "test") {
      *split = o.split;
      o.split.clear();
    }
    int s = -1;
    for (int i = 0; i < 3; ++i) {
      if (*split == order::kSplitNames[i]) s = i;
    }
    if (s < 0) return InvalidArgument("--split-name must be train, valid or test, got " + *split);
    GRIDFEED_ASSIGN_OR_RETURN(order::BuiltDatasets b, BuildFromOptions(o));
    if (!b.splits[s]) return FailedPrecondition("split " + *split + " was not built (empty)");
    const order::SplitDataset& sd = *b.splits[s];
    GRIDFEED_ASSIGN_OR_RETURN(std::vector<int64_t> pos, ParsePositions(*positions, sd.length));
    const auto so = ToSampleOptions(o, b.pad_id_used);
    std::vector<int64_t> tokens, labels, position_ids;
    std::vector<float> loss_mask;
    std::vector<uint8_t> mask;
    std::vector<int16_t> dataset_id;
    order::Sample sample;
    for (int64_t p : pos) {
      auto [k, j] = sd.Locate(p);
      const auto& m = sd.mids[k];
      order::AssembleSample(*m.dataset, m.tables.View(), j, so, &sample);
      tokens.insert(tokens.end(), sample.tokens.begin(), sample.tokens.end());
      labels.insert(labels.end(), sample.labels.begin(), sample.labels.end());
      position_ids.insert(position_ids.end(), sample.position_ids.begin(),
                          sample.position_ids.end());
      loss_mask.insert(loss_mask.end(), sample.loss_mask.begin(), sample.loss_mask.end());
      mask.insert(mask.end(), sample.attention_mask.begin(), sample.attention_mask.end());
      dataset_id.push_back(static_cast<int16_t>(k));
    }
    const int64_t n = static_cast<int64_t>(pos.size()), L = o.seq_length;
    GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(*out));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/items_index.npy", pos));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/tokens.npy", tokens, {n, L}));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/labels.npy", labels, {n, L}));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/loss_mask.npy", loss_mask, {n, L}));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/position_ids.npy", position_ids, {n, L}));
    if (so.create_attention_mask) {
      GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/attention_mask.npy", mask, {n, 1, L, L}));
    }
    if (sd.blended) GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(*out + "/dataset_id.npy", dataset_id));
    std::printf("samples: wrote %lld samples of %s to %s\n", static_cast<long long>(n),
                split->c_str(), out->c_str());
    return Status::Ok();
  };
}

}  // namespace gridfeed::app
