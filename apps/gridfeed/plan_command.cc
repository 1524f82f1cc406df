// gridfeed plan: the arithmetic of a mixture schedule before training
// (order/mixture/mixture_plan.h), and `gridfeed plan shards`, the arithmetic of file-level sharding
// (order/shard_plan.h).
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/mixture/mixture_plan.h"
#include "gridfeed/order/shard_plan.h"
#include "gridfeed/order/split.h"

namespace gridfeed::app {
namespace {

// Each source's size: the train part (--split) of its store, as `run` counts it; the declared
// `tokens` only when the store is not there.
Status SourceSizes(const config::JobOptions& o, const order::MixtureLayout& l,
                   std::vector<double>* tokens, std::vector<bool>* declared) {
  const std::string split = o.data.split.empty() ? "969, 30, 1" : o.data.split;
  GRIDFEED_ASSIGN_OR_RETURN(auto vec, order::ParseAndNormalizeSplit(split));
  const order::SplitMatrix m = order::SplitVectorToMatrix(vec);
  for (const auto& src : l.schedule.sources) {
    auto ds = io::IndexedDataset::Open(src.path);
    if (!ds.ok() && src.tokens > 0 && ds.status().code() == StatusCode::kNotFound) {
      tokens->push_back(static_cast<double>(src.tokens));
      declared->push_back(true);
      continue;
    }
    if (!ds.ok()) {
      return ds.status().WithContext("source '" + src.name + "'" +
                                     (src.tokens > 0 ? ""
                                                     : " (declare its size as sources." + src.name +
                                                           ".tokens to plan without the store)"));
    }
    if (!m[0]) return InvalidArgument("--split '" + split + "' leaves no train part");
    const auto [b, e] = order::BookendToRange(*m[0], ds->num_sequences());
    const auto lengths = ds->sequence_lengths();
    double t = 0;
    for (int64_t i = b; i < e; ++i) t += static_cast<double>(lengths[static_cast<size_t>(i)]);
    tokens->push_back(t);
    declared->push_back(false);
  }
  return Status::Ok();
}

}  // namespace

Runner RegisterPlan(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "plan",
      "Print a mixture schedule's arithmetic per stage and source (shares, tokens, samples, "
      "effective epochs, verdicts, caps); `plan shards` for file-level sharding");
  auto flags = std::make_shared<config::OptionFlags>(
      sub, config::Groups{config::Group::kData, config::Group::kGrid, config::Group::kBatch});
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "JSON instead of the table");
  CLI::App* shards = sub->add_subcommand(
      "shards", "Per-consumer load, utilisation and duplicates of whole shards per consumer");
  auto n = std::make_shared<int64_t>(0), ranks = std::make_shared<int64_t>(0),
       workers = std::make_shared<int64_t>(0);
  shards->add_option("--shards", *n, "Shards (files) in the data")->required();
  shards->add_option("--ranks", *ranks, "Ranks reading (DP size)")->required();
  shards->add_option("--workers", *workers, "DataLoader workers per rank (0: the rank itself)")
      ->required();
  shards->add_flag("--json", *json, "JSON instead of the table");
  return [flags, json, shards, n, ranks, workers]() -> Status {
    if (shards->parsed()) {
      GRIDFEED_ASSIGN_OR_RETURN(order::ShardPlan p, order::PlanShards(*n, *ranks, *workers));
      std::printf("%s\n", (*json ? order::ShardPlanJson(p) : order::ShardPlanText(p)).c_str());
      return Status::Ok();
    }
    GRIDFEED_ASSIGN_OR_RETURN(config::JobOptions o, flags->Resolve());
    if (!o.data.is_mixture()) {
      return InvalidArgument(
          "plan: the configuration has no mixture schedule (the keys "
          "sources and schedule)");
    }
    if (o.batch.global_batch_size == 0) {
      GRIDFEED_ASSIGN_OR_RETURN(const config::MixtureSchedule s,
                                config::ParseMixtureSchedule(o.data.mixture_schedule));
      for (size_t i = 0; i < s.stages.size(); ++i) {
        if (s.stages[i].unit != config::BudgetUnit::kIterations) continue;
        return InvalidArgument("plan: schedule[" + std::to_string(i) + "] ('" + s.stages[i].name +
                               "') is sized in iterations: give --global-batch-size (the run's "
                               "samples per iteration) to plan it");
      }
    }
    GRIDFEED_ASSIGN_OR_RETURN(order::MixtureLayout l, order::LayoutMixture(o));
    GRIDFEED_RETURN_IF_ERROR(order::CheckDistinctStores(l.schedule));
    std::vector<double> tokens;
    std::vector<bool> declared;
    GRIDFEED_RETURN_IF_ERROR(SourceSizes(o, l, &tokens, &declared));
    GRIDFEED_ASSIGN_OR_RETURN(order::MixturePlan p, order::PlanMixture(l, tokens, declared));
    std::printf("%s", (*json ? order::PlanJson(p) + "\n" : order::PlanText(p)).c_str());
    return Status::Ok();
  };
}

}  // namespace gridfeed::app
