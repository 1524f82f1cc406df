#include "gridfeed/order/megatron/megatron_outputs.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/order/megatron/megatron_floor.h"
#include "gridfeed/order/megatron/megatron_pipeline.h"
#include "gridfeed/order/megatron/table_files.h"
#include "gridfeed/order/registry.h"

namespace gridfeed::order {

namespace {

// A mid-level dataset's three tables as Megatron's builder caches them, under `dir`.
std::vector<OutputArray> MidArrays(const std::string& dir, const GptTables& t,
                                   const std::shared_ptr<const void>& owner) {
  std::vector<OutputArray> arrays;
  for (GptTable which : kGptTables) {
    arrays.push_back(MidArray(dir, t, which, owner, /*release_as_written=*/false));
  }
  return arrays;
}

std::string MidDir(int split, size_t k) {
  return std::string(kSplitNames[split]) + "/mid_" + std::to_string(k) + "/";
}

}  // namespace

Result<OfflineOutput> MegatronTables(const config::JobOptions& o, ArraySink* early) {
  // With a sink, each table goes to it as soon as it is final, and a dataset's others (built
  // on one thread: no early writes) once its tables are built. Nothing reads the tables'
  // entries after they are written: their pages go back as they are written, and the files'
  // pages take them.
  decltype(DatasetConfig::on_mid_built) on_mid_built;
  decltype(DatasetConfig::on_table_final) on_table_final;
  std::optional<EarlyTableWrites> writes;
  if (early != nullptr) {
    writes.emplace(early);
    on_table_final = [&writes](int split, size_t k, GptTable table, const GptTables& t,
                               bool read_after) {
      writes->Start(split, k, MidDir(split, k), table, t, read_after);
    };
    on_mid_built = [early, &writes](int split, size_t k, MidDataset& m) -> Status {
      bool written[3];
      GRIDFEED_RETURN_IF_ERROR(writes->Finish(split, k, written));
      // A table the build read after its write (a document index of several epochs) kept
      // its pages: they go back now.
      if (written[static_cast<int>(GptTable::kDocumentIndex)]) {
        m.tables.document_index.ReleaseFront(m.tables.document_index.size());
      }
      std::vector<OutputArray> rest;
      for (GptTable which : kGptTables) {
        if (!written[static_cast<int>(which)]) {
          rest.push_back(MidArray(MidDir(split, k), m.tables, which, nullptr, true));
        }
      }
      m.tables.contents_released = true;
      return early->PutAll(rest);
    };
  }
  GRIDFEED_ASSIGN_OR_RETURN(
      BuiltDatasets built,
      BuildMegatronDatasets(o.data, false, std::move(on_mid_built), std::move(on_table_final)));
  const auto b = std::make_shared<const BuiltDatasets>(std::move(built));
  OfflineOutput out;
  nlohmann::json summary = nlohmann::json::object();
  for (int i = 0; i < 3; ++i) {
    const std::string name = kSplitNames[i];
    if (!b->splits[i]) {
      summary[name] = nullptr;
      continue;
    }
    const SplitDataset& sd = *b->splits[i];
    nlohmann::json js = {{"type", sd.blended ? "BlendedDataset" : "GPTDataset"},
                         {"length", sd.length}};
    nlohmann::json mids = nlohmann::json::array();
    for (size_t k = 0; k < sd.mids.size(); ++k) {
      const auto& m = sd.mids[k];
      const auto& t = m.tables;
      if (early == nullptr) {
        for (OutputArray& a : MidArrays(MidDir(i, k), t, b)) out.arrays.push_back(std::move(a));
      }
      mids.push_back({{"dataset_path", m.prefix},
                      {"sequence_index_range", {m.begin, m.end}},
                      {"num_samples_requested", m.num_samples_requested
                                                    ? nlohmann::json(*m.num_samples_requested)
                                                    : nlohmann::json(nullptr)},
                      {"num_tokens_per_epoch", t.num_tokens_per_epoch},
                      {"epochs", t.num_epochs},
                      {"separate_final_epoch", t.separate_final_epoch},
                      {"length", t.num_samples()}});
    }
    js["mid"] = mids;
    js["epochs"] = mids.size() == 1 ? mids[0]["epochs"] : nlohmann::json(nullptr);
    js["separate_final_epoch"] =
        mids.size() == 1 ? mids[0]["separate_final_epoch"] : nlohmann::json(nullptr);
    if (sd.blended) {
      const std::string dir = name + "/blend/";
      if (sd.mids.size() <= 32767) {  // Megatron's int16
        std::vector<int16_t> di(sd.blend.dataset_index.begin(), sd.blend.dataset_index.end());
        out.Add(dir + "dataset_index.npy", std::move(di));
      } else {  // Megatron's int16 would wrap; keep int32.
        out.AddView(dir + "dataset_index.npy", sd.blend.dataset_index, {}, b);
      }
      out.AddView(dir + "dataset_sample_index.npy", sd.blend.dataset_sample_index, {}, b);
      js["weights"] = sd.weights;
      js["size"] = sd.size ? nlohmann::json(*sd.size) : nlohmann::json(nullptr);
    } else {
      js["weights"] = nullptr;
    }
    summary[name] = js;
  }
  out.texts.push_back({"summary.json", summary.dump(2) + "\n", /*spread=*/true});
  out.summary = "tables: wrote {out} (see summary.json)";
  return out;
}

Result<OfflineOutput> GptSamples(const config::JobOptions& o, const PositionRequest& request) {
  const std::string& name = o.feed.split_name;
  const Split split = SplitNamed(name);
  GRIDFEED_ASSIGN_OR_RETURN(auto pipeline, Pipeline::For(o));
  GRIDFEED_ASSIGN_OR_RETURN(auto built, pipeline->Build());
  const OrderView& view = built->view();
  if (view.length(split) == 0) return FailedPrecondition("split " + name + " is empty");
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<int64_t> pos, request.Resolve(view.length(split)));
  // One array shape: every position at one length (a mixture stage may set its own).
  GRIDFEED_ASSIGN_OR_RETURN(const SeqLengths lengths, SeqLengthsOf(o, split));
  GRIDFEED_ASSIGN_OR_RETURN(const int64_t L, lengths.Common(pos));
  std::vector<int64_t> tokens, labels, position_ids;
  std::vector<float> loss_mask;
  std::vector<uint8_t> mask;
  std::vector<int16_t> dataset_id;
  const size_t n = pos.size();
  tokens.reserve(n * L), labels.reserve(n * L), position_ids.reserve(n * L);
  loss_mask.reserve(n * L);
  Sample sample;
  for (int64_t p : pos) {
    const SampleRecord r = view.Read(split, p, &sample, /*hash_tokens=*/false);
    tokens.insert(tokens.end(), sample.tokens.begin(), sample.tokens.end());
    labels.insert(labels.end(), sample.labels.begin(), sample.labels.end());
    position_ids.insert(position_ids.end(), sample.position_ids.begin(), sample.position_ids.end());
    loss_mask.insert(loss_mask.end(), sample.loss_mask.begin(), sample.loss_mask.end());
    if (o.data.create_attention_mask) {
      mask.insert(mask.end(), sample.attention_mask.begin(), sample.attention_mask.end());
    }
    dataset_id.push_back(static_cast<int16_t>(r.dataset));
  }
  const auto rows = static_cast<int64_t>(n);
  OfflineOutput out;
  out.Add("items_index.npy", std::move(pos));
  out.Add("tokens.npy", std::move(tokens), {rows, L});
  out.Add("labels.npy", std::move(labels), {rows, L});
  out.Add("loss_mask.npy", std::move(loss_mask), {rows, L});
  out.Add("position_ids.npy", std::move(position_ids), {rows, L});
  if (o.data.create_attention_mask) out.Add("attention_mask.npy", std::move(mask), {rows, 1, L, L});
  if (view.is_blend(split)) out.Add("dataset_id.npy", std::move(dataset_id));
  out.summary = "samples: wrote " + std::to_string(rows) + " samples of " + name + " to {out}";
  return out;
}

namespace {

Result<std::unique_ptr<Pipeline>> Make(const config::JobOptions& o) {
  return MakeMegatronPipeline(o.data);
}

}  // namespace

const PipelineKind& MegatronKind() {
  static constexpr PipelineKind kKind = {
      .name = "megatron",
      .selects = [](const config::DataOptions&) { return true; },
      .make = Make,
      .seq_lengths = nullptr,
      .tables = MegatronTables,
      .no_tables = nullptr,
      .samples = GptSamples,
      .floor = MegatronFloor,
      .table_bytes = MegatronTableBytes,
      .no_bench = nullptr,
      .plan = nullptr,
      .no_plan =
          "plan: the configuration has no mixture schedule (the keys sources and "
          "schedule); plan prints a schedule's arithmetic",
  };
  return kKind;
}

}  // namespace gridfeed::order
