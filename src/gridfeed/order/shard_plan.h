// File-level sharding arithmetic (how other loaders split work: whole shards per consumer, a
// consumer being one DataLoader worker of one rank) for `gridfeed plan shards`: the load per
// consumer, the utilisation a synchronous step gets (mean load / largest load), the duplicates
// that padding every consumer to the largest load by repetition adds, the shards that
// truncation drops, and the nearest shard counts that divide evenly. Pure; thread safe.
#pragma once

#include <cstdint>
#include <string>

#include "gridfeed/core/status.h"

namespace gridfeed::order {

struct ShardPlan {
  int64_t shards = 0, ranks = 0, workers = 0, consumers = 0;
  int64_t low_load = 0, high_load = 0;       // shards per consumer
  int64_t consumers_high = 0;                // consumers with high_load
  double utilisation = 0;                    // (shards / consumers) / high_load
  int64_t padded_total = 0, duplicates = 0;  // padding by repetition to high_load each
  double duplicate_rate = 0;                 // duplicates / shards
  int64_t dropped = 0;                       // truncating to low_load each
  int64_t even_below = 0, even_above = 0;    // nearest multiples of consumers (0: none below)
};

// workers 0 counts as one consumer per rank (the loading happens in the rank's process).
// InvalidArgument names the flag for a count below 1 (workers below 0) or above 2^40.
Result<ShardPlan> PlanShards(int64_t shards, int64_t ranks, int64_t workers);
std::string ShardPlanText(const ShardPlan& p);
std::string ShardPlanJson(const ShardPlan& p);

}  // namespace gridfeed::order
