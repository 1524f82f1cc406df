// The arithmetic of a mixture schedule before any compute is spent (`gridfeed plan`): per stage
// and source the target share, tokens and samples allotted, the effective epochs (allotted
// tokens / the source's tokens) and a verdict, the temperature-derived weights next to the
// natural shares, and where max_epochs caps bind. Continuous: targets are the schedule's
// integrals (mixture_blend.h), so counts may differ from the built order by a sample. Pure;
// thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/mixture/mixture_pipeline.h"

namespace gridfeed::order {

// Epochs at or above this risk memorisation; below 1 part of the source is never seen.
inline constexpr double kMemorisationEpochs = 4.0;

struct PlanCell {
  double share = 0;   // the stage's target share of the source (tokens / stage tokens)
  double tokens = 0;  // allotted in this stage
  double samples = 0;
  double epochs = 0;             // this stage's tokens / the source's tokens
  double epochs_cumulative = 0;  // through the end of this stage
};

struct PlanStageRow {
  std::string name;
  int64_t begin = 0, samples = 0, ramp_samples = 0;
  int64_t seq_length = 0;       // tokens per sample in this stage
  bool own_seq_length = false;  // set by the stage, not --seq-length
  std::vector<double> weights;  // target weights after the ramp (normalised)
  double size_exponent = 0;     // > 0: weights from the sizes (temperature/alpha)
  bool from_temperature = false;
  std::vector<PlanCell> cells;  // per source
};

struct PlanCap {
  int source = 0, stage = 0;
  int64_t position = 0;  // where the source's weight drops to 0
  double max_epochs = 0;
};

struct MixturePlan {
  std::vector<std::string> source_names;
  std::vector<double> source_tokens;    // train part (or declared)
  std::vector<bool> declared;           // size from the config's `tokens`, not the store
  std::vector<double> declared_tokens;  // the config's `tokens` (0: none), used or not
  std::vector<double> natural_share;
  int64_t seq_length = 0, length = 0;
  double tokens = 0;  // over every stage at its length
  std::vector<PlanStageRow> stages;
  std::vector<PlanCap> caps;
  std::vector<double> total_tokens, total_epochs;  // per source over the run
};

// `source_tokens`: each source's size in tokens (> 0); `declared` marks the declared ones.
// A cap binds where `run`'s does: after floor(max_epochs x floor((tokens - extra token) /
// --seq-length)) samples of --seq-length, placed where the continuous target reaches it (so
// within a sample or two of the built order).
Result<MixturePlan> PlanMixture(const MixtureLayout& layout,
                                const std::vector<double>& source_tokens,
                                const std::vector<bool>& declared);
// "memorisation risk (>= 4 epochs)", "part never seen (x% unseen)", "ok".
std::string EpochVerdict(double epochs);
// Human table and JSON (sorted keys).
std::string PlanText(const MixturePlan& plan);
std::string PlanJson(const MixturePlan& plan);

// `gridfeed plan` for a mixture configuration: each source sized by the train part (--split) of
// its store as `run` counts it (its declared `tokens` when the store is not there), then
// PlanMixture as PlanText or PlanJson (with a newline). InvalidArgument for a stage sized in
// iterations without --global-batch-size; the store's error, with a hint, for a missing source.
// Reads every source's index; collective-free.
Result<std::string> PlanReport(const config::JobOptions& options, bool json);

}  // namespace gridfeed::order
