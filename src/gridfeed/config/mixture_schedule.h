// A mixture schedule: named token sources, stages with a budget and target weights (given, or
// from the sources' sizes by temperature), optional linear ramps between stages and per-source
// epoch caps. A gridfeed YAML sets it with the top-level keys `sources`, `schedule` and
// `max_epochs`; the validated schedule is kept as one canonical JSON string in the option
// --mixture-schedule (config/options.h), so it is part of the fingerprint exactly as written.
//
//   sources: {web: data/web_text_document, code: {path: data/code_text_document, tokens: 100e9}}
//   schedule:
//     - {name: main,   tokens: 800e9, mixture: {web: 0.6, code: 0.4}}
//     - {name: anneal, tokens: 50e9,  mixture: {web: 0.3, code: 0.7}, ramp_tokens: 10e9}
//     - {name: tail,   samples: 1000, temperature: 2}   # or alpha: 0.5: weights ~ size^alpha
//   max_epochs: {code: 2.5}
//
// A stage has exactly one budget (tokens | samples | iterations) and exactly one of mixture,
// temperature (weights ~ size^(1/T)) or alpha (weights ~ size^alpha); ramp_tokens or
// ramp_samples (not on the first stage, at most the stage's budget) ramp linearly from the
// previous stage's weights. A source's `tokens` is a declared size, used only by `gridfeed plan`
// when its token store is not at hand. A stage's `seq_length` (e.g. a final long-context stage)
// replaces --seq-length for its samples: each source is then read from its own tables at that
// length (order/mixture/mixture_pipeline.h), and micro-batches of the stage report it.
// Pure functions; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace YAML {
class Node;
}

namespace gridfeed::config {

enum class BudgetUnit { kTokens, kSamples, kIterations };
const char* BudgetUnitName(BudgetUnit u);  // "tokens", "samples", "iterations"

struct MixtureSource {
  std::string name;
  std::string path;    // Megatron token store prefix (.bin/.idx)
  int64_t tokens = 0;  // declared size for planning; 0 = read the store
};

struct MixtureStage {
  std::string name;
  BudgetUnit unit = BudgetUnit::kSamples;
  int64_t budget = 0;
  std::vector<double> weights;    // per source, as written (not normalised); empty: by size
  double size_exponent = 0;       // weights ~ size^exponent when `weights` is empty
  bool from_temperature = false;  // written as temperature (1/exponent) rather than alpha
  BudgetUnit ramp_unit = BudgetUnit::kSamples;  // kTokens or kSamples
  int64_t ramp = 0;                             // 0 = the weights switch at once
  int64_t seq_length = 0;                       // tokens per sample; 0 = --seq-length
};

// The longest sequence a stage may ask for (stage samples x length stays within int64).
inline constexpr int64_t kMaxStageSeqLength = int64_t{1} << 24;

struct MixtureSchedule {
  std::vector<MixtureSource> sources;
  std::vector<MixtureStage> stages;
  std::vector<double> max_epochs;  // per source; 0 = no cap
};

// Parses and validates a schedule given as JSON (the --mixture-schedule text). InvalidArgument
// names the key, e.g. "schedule[1].mixture.code must be a number >= 0".
Result<MixtureSchedule> ParseMixtureSchedule(const std::string& json_text);
// The canonical JSON of a valid schedule (sorted keys; ParseMixtureSchedule's exact inverse).
std::string MixtureScheduleJson(const MixtureSchedule& s);
// From a gridfeed YAML's top-level `sources`, `schedule` and `max_epochs` (any may be absent:
// nothing set). On success `*json_text` receives the canonical JSON. InvalidArgument names the
// file and the key.
Status MixtureScheduleFromYaml(const std::string& path, const YAML::Node& root,
                               std::string* json_text);
// When `after` (a --mixture-schedule text) names the same sources as `before` (same names and
// paths) in another order: "the amended schedule reorders the sources (saved: a, b; now: b, a)
// ...", else "". A source's id is its place under `sources`, so a reorder renumbers them.
std::string DescribeSourceReorder(const std::string& before, const std::string& after);
// Whether `key` is one of the top-level keys a schedule uses.
bool IsMixtureKey(const std::string& key);

}  // namespace gridfeed::config
