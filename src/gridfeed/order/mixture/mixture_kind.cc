// The scheduled mixture's registry entry (registry.h): its samples are GPT samples of its own
// blend; it has no Megatron tables to write (its arithmetic is `gridfeed plan`'s).
#include "gridfeed/order/megatron/megatron_floor.h"
#include "gridfeed/order/megatron/megatron_outputs.h"
#include "gridfeed/order/mixture/mixture_pipeline.h"
#include "gridfeed/order/mixture/mixture_plan.h"
#include "gridfeed/order/registry.h"

namespace gridfeed::order {
namespace {

Result<std::unique_ptr<Pipeline>> Make(const config::JobOptions& o) {
  return MakeMixturePipeline(o);
}

// The stages' lengths along the train split, merged where consecutive stages share one.
Result<SeqLengths> StageLengths(const config::JobOptions& options, Split split) {
  SeqLengths out;
  if (split != Split::kTrain) {
    out.begin = {0};
    out.length = {options.data.seq_length};
    return out;
  }
  GRIDFEED_ASSIGN_OR_RETURN(const MixtureLayout l, LayoutMixture(options));
  for (size_t i = 0; i < l.stage_seq_length.size(); ++i) {
    if (!out.length.empty() && out.length.back() == l.stage_seq_length[i]) continue;
    out.begin.push_back(out.begin.empty() ? 0 : l.stage_begin[i]);
    out.length.push_back(l.stage_seq_length[i]);
  }
  return out;
}

}  // namespace

const PipelineKind& MixtureKind() {
  static constexpr PipelineKind kKind = {
      .name = "mixture",
      .selects = [](const config::DataOptions& d) { return d.is_mixture(); },
      .make = Make,
      .seq_lengths = StageLengths,
      .tables = nullptr,
      .no_tables =
          "tables: the configuration is a mixture schedule (sources/schedule), whose order "
          "`gridfeed run` builds: see its arithmetic with `gridfeed plan --config FILE` and its "
          "samples with `gridfeed samples --config FILE --positions ...`; `tables` writes "
          "Megatron's --data-path tables and OLMo's global indices",
      .samples = GptSamples,
      .floor = MegatronFloor,
      .table_bytes = MegatronTableBytes,
      .no_bench = nullptr,
      .plan = PlanReport,
      .no_plan = nullptr,
  };
  return kKind;
}

}  // namespace gridfeed::order
