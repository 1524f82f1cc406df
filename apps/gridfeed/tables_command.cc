// gridfeed tables: build every split's index tables and write them in the layout of a
// golden case folder, plus summary.json.
#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/megatron/megatron_pipeline.h"
#include "olmo_outputs.h"
#include "sft_outputs.h"

namespace gridfeed::app {
namespace {

// Runs `writes` on two threads (each copies into the page cache and syncs its own file, so
// two overlap); the first error in order, if any.
Status RunWrites(const std::vector<std::function<Status()>>& writes) {
  std::vector<Status> statuses(writes.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < writes.size();) statuses[i] = writes[i]();
  };
  {
    std::jthread other(worker);
    worker();
  }
  for (auto& st : statuses) GRIDFEED_RETURN_IF_ERROR(st);
  return Status::Ok();
}

Status WriteTables(const order::BuiltDatasets& b, const std::string& out) {
  nlohmann::json summary = nlohmann::json::object();
  std::vector<std::function<Status()>> writes;
  for (int i = 0; i < 3; ++i) {
    const std::string name = order::kSplitNames[i];
    if (!b.splits[i]) {
      summary[name] = nullptr;
      continue;
    }
    const order::SplitDataset& sd = *b.splits[i];
    nlohmann::json js = {{"type", sd.blended ? "BlendedDataset" : "GPTDataset"},
                         {"length", sd.length}};
    nlohmann::json mids = nlohmann::json::array();
    for (size_t k = 0; k < sd.mids.size(); ++k) {
      const auto& m = sd.mids[k];
      const auto& t = m.tables;
      const std::string dir = out + "/" + name + "/mid_" + std::to_string(k);
      GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(dir));
      writes.push_back(
          [&t, dir] { return io::WriteNpy(dir + "/document_index.npy", t.document_index); });
      writes.push_back([&t, dir] {
        const int64_t rows = t.num_samples() + 1;
        return t.sample_index_is_int64
                   ? io::WriteNpy(dir + "/sample_index.npy", t.sample_index64, {rows, 2})
                   : io::WriteNpy(dir + "/sample_index.npy", t.sample_index32, {rows, 2});
      });
      writes.push_back([&t, dir] {
        return t.shuffle_index_is_int64
                   ? io::WriteNpy(dir + "/shuffle_index.npy", t.shuffle_index64)
                   : io::WriteNpy(dir + "/shuffle_index.npy", t.shuffle_index32);
      });
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
      const std::string dir = out + "/" + name + "/blend";
      GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(dir));
      if (sd.mids.size() <= 32767) {
        std::vector<int16_t> di(sd.blend.dataset_index.begin(), sd.blend.dataset_index.end());
        GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(dir + "/dataset_index.npy", di));
      } else {  // Megatron's int16 would wrap; keep int32.
        GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(dir + "/dataset_index.npy", sd.blend.dataset_index));
      }
      GRIDFEED_RETURN_IF_ERROR(
          io::WriteNpy(dir + "/dataset_sample_index.npy", sd.blend.dataset_sample_index));
      js["weights"] = sd.weights;
      js["size"] = sd.size ? nlohmann::json(*sd.size) : nlohmann::json(nullptr);
    } else {
      js["weights"] = nullptr;
    }
    summary[name] = js;
  }
  GRIDFEED_RETURN_IF_ERROR(RunWrites(writes));
  return io::WriteStringToFile(out + "/summary.json", summary.dump(2) + "\n");
}

}  // namespace

Runner RegisterTables(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "tables",
      "Build the order's tables and write them (Megatron's index tables, or OLMo's "
      "global_indices.npy)");
  // Grid and batch: an OLMo order depends on the DP size and the global batch size.
  auto flags = std::make_shared<config::OptionFlags>(
      sub, config::Groups{config::Group::kData, config::Group::kGrid, config::Group::kBatch});
  auto out = std::make_shared<std::string>();
  sub->add_option("--out", *out, "Output folder")->required();
  return [flags, out]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(config::JobOptions o, flags->Resolve());
    if (o.data.is_olmo()) return WriteOlmoTables(o, *out);
    if (o.data.is_sft()) return WriteSftTables(o, *out);
    if (o.data.is_mixture()) {
      return InvalidArgument(
          "tables: the configuration is a mixture schedule (sources/schedule), whose order "
          "`gridfeed run` builds: see its arithmetic with `gridfeed plan --config FILE` and its "
          "samples with `gridfeed samples --config FILE --positions ...`; `tables` writes "
          "Megatron's --data-path tables and OLMo's global indices");
    }
    GRIDFEED_ASSIGN_OR_RETURN(order::BuiltDatasets b, order::BuildMegatronDatasets(o.data));
    GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(*out));
    GRIDFEED_RETURN_IF_ERROR(WriteTables(b, *out));
    std::printf("tables: wrote %s (see summary.json)\n", out->c_str());
    return Status::Ok();
  };
}

}  // namespace gridfeed::app
