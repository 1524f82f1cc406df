// A scheduled mixture as a Pipeline (order/pipeline.h), selected by --mixture-schedule (a
// config's sources/schedule/max_epochs, config/mixture_schedule.h). The train split is the
// schedule: the source of each position comes from the scheduled blend (mixture_blend.h); each
// source's own samples from its Megatron GPT tables over its --split train part (shuffled per
// source, with enough epochs for the samples the schedule draws from it plus
// --mid-level-dataset-surplus, as Megatron asks of a blend source). The tables are Megatron's
// (table_image.h), so the image, the view and sample assembly are Megatron's too; valid and
// test splits are not built. One stage without ramp or caps gives Megatron's weighted blend of
// the same sources (for a size that Megatron's sum of ceil(N * w) reaches).
//
// Positions: budgets in tokens are ceil(tokens / the stage's seq length) samples, iterations are
// x --global-batch-size (micro-batch x DP when 0). Temperature weights use each source's train
// part in tokens. The resolved stage boundaries are part of the data facts (fingerprint).
//
// Stage lengths: a stage with its own seq_length reads every source from that source's own
// tables at that length (built for the samples drawn at it, plus surplus): a source at another
// length is another stream of samples. Stages of one length share their tables, so their
// positions continue one stream. Such a stage must start on a global batch boundary of the
// run (the feeder checks it against the batches the run reads).
// Caps count tokens: a source is capped once its samples' lengths add up to max_epochs x its
// samples per epoch at --seq-length x --seq-length (with one length: Megatron's sample count).
// Thread safe where pipeline.h says so.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/mixture/mixture_blend.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::order {

// The most tokens a schedule may hold (its samples x their lengths), so counts fit in int64.
inline constexpr int64_t kMaxMixtureTokens = int64_t{1} << 62;

// The schedule in positions, from the options alone.
struct MixtureLayout {
  config::MixtureSchedule schedule;
  std::vector<int64_t> stage_samples, ramp_samples;
  std::vector<int64_t> stage_begin;       // first position of each stage, then the length
  std::vector<int64_t> stage_seq_length;  // tokens per sample of each stage
  int64_t length = 0;
  int64_t seq_length = 0, global_batch_size = 0;
  int64_t extra_token = 1;  // 0 with --no-add-extra-token (a sample reads seq_length + this)
  // The stage holding `position` (the last stage for position >= length).
  int StageAt(int64_t position) const;
};
// InvalidArgument names the schedule key (a ramp longer than its stage, a total over 2^40).
Result<MixtureLayout> LayoutMixture(const config::JobOptions& o);
// Weights ~ size^exponent per source (0 for an empty one), not normalised: the direct powers
// when their sum is finite, else computed relative to the largest source in log space (a small
// temperature: size^100 overflows), so they stay finite.
std::vector<double> SizeWeights(const std::vector<double>& source_tokens, double exponent);
// The stages with normalised weights; `source_tokens` (per source) sizes the temperature/alpha
// stages.
std::vector<BlendStage> MixtureStages(const MixtureLayout& layout,
                                      const std::vector<double>& source_tokens);

// Two sources naming one token store in different spellings (dir//x, dir/../dir/x, a symlink, a
// hard link) would both be fed in full: InvalidArgument naming both, by file identity (device
// and inode of the .idx or .bin; io::FileIdentity), not by path text. Missing files pass (their
// open reports them). Build, MixtureBlend and `gridfeed plan` check it.
Status CheckDistinctStores(const config::MixtureSchedule& s);

// The scheduled blend the pipeline builds for these options (opens the sources' indexes for
// their sizes and caps): its cumulative targets are what an audit compares consumption with.
Result<ScheduledBlend> MixtureBlend(const config::JobOptions& o, const MixtureLayout& layout);

std::unique_ptr<Pipeline> MakeMixturePipeline(const config::JobOptions& options);

struct PipelineKind;
// The registry's entry (registry.h; mixture_kind.cc).
const PipelineKind& MixtureKind();

}  // namespace gridfeed::order
