// gridfeed plan: the arithmetic of a mixture schedule before training (the pipeline's plan,
// order/registry.h), and `gridfeed plan shards`, the arithmetic of file-level sharding
// (order/shard_plan.h).
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/order/registry.h"
#include "gridfeed/order/shard_plan.h"

namespace gridfeed::app {

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
    const order::PipelineKind& kind = order::KindOf(o.data);
    if (kind.plan == nullptr) return InvalidArgument(kind.no_plan);
    GRIDFEED_ASSIGN_OR_RETURN(const std::string report, kind.plan(o, *json));
    std::printf("%s", report.c_str());
    return Status::Ok();
  };
}

}  // namespace gridfeed::app
