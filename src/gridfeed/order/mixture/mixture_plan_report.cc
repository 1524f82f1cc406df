// `gridfeed plan`'s report for a mixture (mixture_plan.h's PlanReport): the sources' sizes as
// `run` counts them, then the schedule's arithmetic.
#include <string>
#include <vector>

#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/mixture/mixture_plan.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order {
namespace {

// Each source's size: the train part (--split) of its store, as `run` counts it; the declared
// `tokens` only when the store is not there.
Status SourceSizes(const config::JobOptions& o, const MixtureLayout& l, std::vector<double>* tokens,
                   std::vector<bool>* declared) {
  std::vector<std::string> unused_warnings;  // the build that `run` does reports them
  GRIDFEED_ASSIGN_OR_RETURN(const SplitMatrix m, SplitMatrixOf(o.data.split, &unused_warnings));
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
    if (!m[0]) return InvalidArgument("--split '" + o.data.split + "' leaves no train part");
    const auto [b, e] = BookendToRange(*m[0], ds->num_sequences());
    const auto lengths = ds->sequence_lengths();
    double t = 0;
    for (int64_t i = b; i < e; ++i) t += static_cast<double>(lengths[static_cast<size_t>(i)]);
    tokens->push_back(t);
    declared->push_back(false);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> PlanReport(const config::JobOptions& o, bool json) {
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
  GRIDFEED_ASSIGN_OR_RETURN(MixtureLayout l, LayoutMixture(o));
  GRIDFEED_RETURN_IF_ERROR(CheckDistinctStores(l.schedule));
  std::vector<double> tokens;
  std::vector<bool> declared;
  GRIDFEED_RETURN_IF_ERROR(SourceSizes(o, l, &tokens, &declared));
  GRIDFEED_ASSIGN_OR_RETURN(MixturePlan p, PlanMixture(l, tokens, declared));
  return json ? PlanJson(p) + "\n" : PlanText(p);
}

}  // namespace gridfeed::order
