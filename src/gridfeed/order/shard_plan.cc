#include "gridfeed/order/shard_plan.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace gridfeed::order {

Result<ShardPlan> PlanShards(int64_t shards, int64_t ranks, int64_t workers) {
  constexpr int64_t kMax = int64_t{1} << 40;
  if (shards < 1 || shards > kMax) return InvalidArgument("--shards must be in [1, 2^40]");
  if (ranks < 1 || ranks > (int64_t{1} << 24))
    return InvalidArgument("--ranks must be in [1, 2^24]");
  if (workers < 0 || workers > (int64_t{1} << 16)) {
    return InvalidArgument("--workers must be in [0, 65536]");
  }
  ShardPlan p;
  p.shards = shards;
  p.ranks = ranks;
  p.workers = workers;
  p.consumers = ranks * (workers == 0 ? 1 : workers);
  const int64_t c = p.consumers;
  p.low_load = shards / c;
  p.consumers_high = shards % c;
  p.high_load = p.low_load + (p.consumers_high > 0 ? 1 : 0);
  if (p.consumers_high == 0) p.consumers_high = c;
  p.utilisation = static_cast<double>(shards) / static_cast<double>(c * p.high_load);
  p.padded_total = c * p.high_load;
  p.duplicates = p.padded_total - shards;
  p.duplicate_rate = static_cast<double>(p.duplicates) / static_cast<double>(shards);
  p.dropped = shards - c * p.low_load;
  p.even_below = c * p.low_load;
  p.even_above = c * p.high_load;
  return p;
}

std::string ShardPlanText(const ShardPlan& p) {
  const auto ll = [](int64_t v) { return static_cast<long long>(v); };
  const bool even = p.high_load == p.low_load;
  char load[256], counts[128];
  if (even) {
    std::snprintf(load, sizeof(load), "each of the %lld consumers reads %lld shards",
                  ll(p.consumers), ll(p.high_load));
    std::snprintf(counts, sizeof(counts), "%lld shards divide evenly", ll(p.shards));
  } else {
    std::snprintf(load, sizeof(load), "%lld consumers read %lld shards, %lld read %lld",
                  ll(p.consumers_high), ll(p.high_load), ll(p.consumers - p.consumers_high),
                  ll(p.low_load));
    std::snprintf(counts, sizeof(counts), "shard counts that divide evenly: %lld and %lld",
                  ll(p.even_below), ll(p.even_above));
  }
  char b[1024];
  std::snprintf(b, sizeof(b),
                "shard plan: %lld shards on %lld consumers (%lld ranks x %lld workers)\n"
                "  load: %s\n"
                "  utilisation (mean / largest load): %.1f%%\n"
                "  pad by repetition to %lld each: %lld shard reads, %lld duplicates (%.1f%% of "
                "the data)\n"
                "  truncate to %lld each: %lld shards dropped (%.1f%% never read per epoch)\n"
                "  %s\n",
                ll(p.shards), ll(p.consumers), ll(p.ranks), ll(p.workers), load,
                100 * p.utilisation, ll(p.high_load), ll(p.padded_total), ll(p.duplicates),
                100 * p.duplicate_rate, ll(p.low_load), ll(p.dropped),
                100 * static_cast<double>(p.dropped) / static_cast<double>(p.shards), counts);
  return b;
}

std::string ShardPlanJson(const ShardPlan& p) {
  return nlohmann::json{{"shards", p.shards},
                        {"ranks", p.ranks},
                        {"workers", p.workers},
                        {"consumers", p.consumers},
                        {"low_load", p.low_load},
                        {"high_load", p.high_load},
                        {"consumers_high", p.consumers_high},
                        {"utilisation", p.utilisation},
                        {"padded_total", p.padded_total},
                        {"duplicates", p.duplicates},
                        {"duplicate_rate", p.duplicate_rate},
                        {"dropped", p.dropped},
                        {"even_below", p.even_below},
                        {"even_above", p.even_above}}
      .dump(2);
}

}  // namespace gridfeed::order
