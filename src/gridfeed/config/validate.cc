// Validate and the checks of the options against each other and the world: ranges, the
// pipeline-specific rules (OLMo, mixtures, data-args files, SFT, FIM), the grid.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/config/olmo_yaml.h"
#include "gridfeed/config/options.h"
#include "gridfeed/config/tokenizer_options.h"
#include "gridfeed/core/parse.h"

namespace gridfeed::config {
namespace {

// A bound as people write it: 2^40, 2^62 - 1, else the number.
// A flag's floating-point value as the user wrote it: JSON would print NaN and infinities as
// "null".
std::string NumberText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return nlohmann::json(v).dump();
}

std::string BoundText(int64_t v) {
  for (int k = 10; k < 63; ++k) {
    const int64_t p = int64_t{1} << k;
    if (v == p) return "2^" + std::to_string(k);
    if (v == p - 1) return "2^" + std::to_string(k) + " - 1";
  }
  if (v == std::numeric_limits<int64_t>::max()) return "2^63 - 1";
  return std::to_string(v);
}

// `what` describes the lower bound (">= 0") or the whole range ("in [1, 2^40]"); a value above
// `hi` is told the upper bound too.
Status Range(const char* flag, int64_t v, int64_t lo, int64_t hi, const char* what) {
  if (v < lo || v > hi) {
    std::string text = what;
    if (v > hi && text.rfind("in [", 0) != 0) text += " and at most " + BoundText(hi);
    return InvalidArgument(std::string("--") + flag + " must be " + text + ", got " +
                           std::to_string(v));
  }
  return Status::Ok();
}

// An OLMo order: its own rows in range, Megatron's data rows unused.
Status ValidateOlmo(const JobOptions& o) {
  const auto& d = o.data;
  if (!d.data_path.empty() || !d.train_data_path.empty() || !d.valid_data_path.empty() ||
      !d.test_data_path.empty()) {
    return InvalidArgument(
        "--olmo-paths (an OLMo configuration's data.paths/data.datasets) and Megatron's "
        "--data-path/--train-data-path/... are exclusive");
  }
  if (d.dataloader_type != "single") {
    return InvalidArgument("--dataloader-type " + d.dataloader_type +
                           " is Megatron's sampler; an OLMo configuration follows OLMo's order");
  }
  GRIDFEED_RETURN_IF_ERROR(Range("seed", d.seed, 0, kMaxInt64Seed, ">= 0"));
  if (!d.olmo_seed.empty()) {
    JobOptions parsed;
    GRIDFEED_RETURN_IF_ERROR(SetOlmoSeed("--olmo-seed", d.olmo_seed, &parsed.data));
    if (parsed.data.olmo_seed != d.olmo_seed) {
      return InvalidArgument("--olmo-seed " + d.olmo_seed.substr(0, 80) +
                             " is a seed beyond 2^62 without leading zeros (else --seed)");
    }
    if (d.seed != 0) {
      return InvalidArgument("--seed " + std::to_string(d.seed) + " and --olmo-seed " +
                             d.olmo_seed.substr(0, 80) + " are both given: give one");
    }
  }
  GRIDFEED_RETURN_IF_ERROR(Range("olmo-epoch", d.olmo_epoch, 0, int64_t{1} << 40, ">= 0"));
  GRIDFEED_RETURN_IF_ERROR(
      Range("olmo-num-workers", d.olmo_num_workers, 0, int64_t{1} << 20, "in [0, 2^20]"));
  if (!d.olmo_path_labels.empty() && d.olmo_path_labels.size() != d.olmo_paths.size()) {
    return InvalidArgument("--olmo-path-labels has " + std::to_string(d.olmo_path_labels.size()) +
                           " labels for " + std::to_string(d.olmo_paths.size()) + " --olmo-paths");
  }
  if (!d.olmo_label_mask_paths.empty() && d.olmo_label_mask_paths.size() != d.olmo_paths.size()) {
    return InvalidArgument("--olmo-label-mask-paths has " +
                           std::to_string(d.olmo_label_mask_paths.size()) + " files for " +
                           std::to_string(d.olmo_paths.size()) + " --olmo-paths");
  }
  if (d.olmo_generate_attention_mask && d.pad_id < 0) {
    return InvalidArgument(
        "--olmo-generate-attention-mask (data.generate_attention_mask) needs --pad-id "
        "(model.pad_token_id)");
  }
  GRIDFEED_RETURN_IF_ERROR(Range("olmo-repetition-max-period", d.olmo_repetition_max_period, 0,
                                 int64_t{1} << 40, ">= 0"));
  GRIDFEED_RETURN_IF_ERROR(Range("olmo-repetition-min-period", d.olmo_repetition_min_period, 1,
                                 int64_t{1} << 40, ">= 1"));
  GRIDFEED_RETURN_IF_ERROR(
      Range("olmo-repetition-max-count", d.olmo_repetition_max_count, 0, int64_t{1} << 40, ">= 0"));
  return Range("device-train-batch-size", o.batch.device_train_batch_size, 0, int64_t{1} << 40,
               ">= 0");
}

// A scheduled mixture: a valid schedule, the sources instead of Megatron's blend flags.
Status ValidateMixture(const JobOptions& o) {
  const auto& d = o.data;
  if (d.is_olmo() || !d.data_path.empty() || !d.train_data_path.empty() ||
      !d.valid_data_path.empty() || !d.test_data_path.empty()) {
    return InvalidArgument(
        "--mixture-schedule (a config's sources/schedule) names its own token stores: drop "
        "--data-path/--train-data-path/--valid-data-path/--test-data-path/--olmo-paths");
  }
  if (d.train_samples != "none") {
    return InvalidArgument(
        "--train-samples: with a mixture schedule the stages' budgets "
        "decide the train samples");
  }
  if (d.dataloader_type != "single") {
    return InvalidArgument("--dataloader-type " + d.dataloader_type +
                           ": a mixture schedule is read once, in order (single)");
  }
  GRIDFEED_ASSIGN_OR_RETURN(const MixtureSchedule s, ParseMixtureSchedule(d.mixture_schedule));
  const int64_t cp = o.grid.context_parallel_size;
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const int64_t len = s.stages[i].seq_length;
    if (cp > 1 && len > 0 && len % (2 * cp) != 0) {
      return InvalidArgument("mixture schedule: schedule[" + std::to_string(i) + "].seq_length " +
                             std::to_string(len) + " must be divisible by 2 x " +
                             "--context-parallel-size = " + std::to_string(2 * cp));
    }
  }
  return Status::Ok();
}

// The many-file flags (config/data_args.h): read by LoadDataArgFiles, and used where they apply.
Status ValidateDataArgFiles(const JobOptions& o) {
  const auto& d = o.data;
  const std::string unread =
      " was not read (config::LoadDataArgFiles reads it for the command line and a YAML file; "
      "elsewhere give the lists it holds)";
  const std::pair<const char*, const std::string*> files[] = {
      {"--data-args-path", &d.data_args_path},
      {"--per-split-data-args-path", &d.per_split_data_args_path},
      {"--per-dataset-sequences-path", &d.per_dataset_sequences_path}};
  for (const auto& [flag, path] : files) {
    if (!path->empty() && !d.data_arg_files_read) {
      return InvalidArgument(std::string(flag) + " '" + *path + "'" + unread);
    }
  }
  if (!d.per_dataset_sequences_path.empty()) {
    if (d.is_olmo() || d.is_mixture() || d.is_sft()) {
      return InvalidArgument(
          "--per-dataset-sequences-path counts the .idx files of Megatron's --data-path and "
          "per-split lists: drop it with " +
          std::string(d.is_olmo()      ? "--olmo-paths"
                      : d.is_mixture() ? "--mixture-schedule"
                                       : "--sft"));
    }
  }
  return Status::Ok();
}

// The tokenizer flags of SFT and FIM (text::CheckTokenizerSpec: a known type, the flags it
// needs, none it does not read); `who` needs a tokenizer because `why`.
Status CheckTokenizerFlags(const DataOptions& d, const std::string& who, const char* why) {
  if (!HasTokenizer(d)) {
    return InvalidArgument(who + " needs a tokenizer (" + why +
                           "): --tokenizer-model (a Hugging Face folder with tokenizer.json, a "
                           "gf_tokenizer.json or its folder, or a SentencePiece model), or "
                           "--tokenizer-type with the flags it reads (GPT2BPETokenizer: "
                           "--vocab-file and --merge-file; NullTokenizer: --vocab-size)");
  }
  Status s = text::CheckTokenizerSpec(TokenizerSpecOf(d));
  if (!s.ok()) return Status(s.code(), who + ": " + s.message());
  return Status::Ok();
}

// Megatron's SFT: what SFTDataset asserts, and the flags it needs.
Status ValidateSft(const JobOptions& o) {
  const auto& d = o.data;
  if (d.is_olmo() || d.is_mixture()) {
    return InvalidArgument("--sft reads JSON Lines named by --data-path: drop " +
                           std::string(d.is_olmo() ? "--olmo-paths" : "--mixture-schedule"));
  }
  GRIDFEED_RETURN_IF_ERROR(CheckTokenizerFlags(d, "--sft", "SFT renders and encodes text"));
  const int64_t cp = o.grid.context_parallel_size, packs_for = d.sft_context_parallel_size;
  if (packs_for < 0 || packs_for > (int64_t{1} << 24) ||
      (packs_for > 0 && cp > 1 && packs_for != cp)) {
    return InvalidArgument("--sft-context-parallel-size " + std::to_string(packs_for) +
                           " differs from --context-parallel-size " + std::to_string(cp));
  }
  if (packs_for > 1 && d.seq_length % (2 * packs_for) != 0) {
    return InvalidArgument("--seq-length " + std::to_string(d.seq_length) +
                           " must be divisible by 2 x the SFT CP size " +
                           std::to_string(packs_for));
  }
  if (d.seq_length >= std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("--seq-length " + std::to_string(d.seq_length) +
                           " with --sft: cu_seqlens and max_seqlen are int32 (below 2^31 - 1)");
  }
  const std::pair<bool, const char*> refused[] = {
      {d.reset_position_ids, "--reset-position-ids"},
      {d.reset_attention_mask, "--reset-attention-mask"},
      {d.create_attention_mask, "--create-attention-mask"}};
  for (const auto& [set, flag] : refused) {
    if (set) {
      return InvalidArgument(std::string(flag) +
                             " does not apply to --sft (packed sequences carry their own "
                             "positions and cu_seqlens; Megatron asserts it off)");
    }
  }
  return Status::Ok();
}

// Megatron's FIM: its argument checks (AR) and what GPTFIMDataset needs.
Status ValidateFim(const JobOptions& o) {
  const auto& d = o.data;
  if (d.is_sft() || d.is_olmo() || d.is_mixture()) {
    return InvalidArgument("--fim-data reads GPT token stores named by --data-path: drop " +
                           std::string(d.is_sft()    ? "--sft"
                                       : d.is_olmo() ? "--olmo-paths"
                                                     : "--mixture-schedule"));
  }
  if (d.dataloader_type == "cyclic") {
    // Megatron restarts its DataLoader's worker cycle each epoch (persistent workers keep their
    // streams); that is not reproduced or verified yet, so it is refused, not fed differently.
    return InvalidArgument(
        "--fim-data with --dataloader-type cyclic: FIM's worker streams across epochs are not "
        "built yet; use --dataloader-type single");
  }
  GRIDFEED_RETURN_IF_ERROR(CheckTokenizerFlags(d, "--fim-data", "FIM decodes and re-encodes text"));
  const std::pair<const char*, double> rates[] = {{"--fim-rate", d.fim_rate},
                                                  {"--fim-spm-rate", d.fim_spm_rate}};
  for (const auto& [flag, v] : rates) {
    if (!(v > 0 && v <= 1)) {
      return InvalidArgument(std::string(flag) +
                             " must be nonzero and a probability in (0, 1], got " + NumberText(v));
    }
  }
  if (!d.fim_split_sample.empty() && !(d.fim_fragment_rate >= 0 && d.fim_fragment_rate <= 1)) {
    return InvalidArgument(
        "--fim-split-sample needs --fim-fragment-rate, a probability in [0, 1], got " +
        NumberText(d.fim_fragment_rate));
  }
  if (d.fim_fragment_rate != -1 && !(d.fim_fragment_rate >= 0 && d.fim_fragment_rate <= 1)) {
    return InvalidArgument(
        "--fim-fragment-rate must be a probability in [0, 1] (or -1: none), got " +
        NumberText(d.fim_fragment_rate));
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const JobOptions& o) {
  GRIDFEED_RETURN_IF_ERROR(ValidateRowValues(o));
  GRIDFEED_RETURN_IF_ERROR(ValidateDataArgFiles(o));
  const auto& d = o.data;
  if (o.feed.node_window == "reads" && d.dataloader_type == "cyclic") {
    return InvalidArgument(
        "--node-window reads needs --dataloader-type single (a cyclic sampler reads every "
        "sample again each epoch); use --node-window full or auto");
  }
  GRIDFEED_RETURN_IF_ERROR(TableProducers(o.feed, 1).status());
  if (d.seq_length <= 0) return InvalidArgument("--seq-length must be given and positive");
  GRIDFEED_RETURN_IF_ERROR(Range("seq-length", d.seq_length, 1, int64_t{1} << 40, "in [1, 2^40]"));
  GRIDFEED_RETURN_IF_ERROR(Range("num-workers", d.num_workers, 0, 1024, "in [0, 1024]"));
  if (d.is_mixture()) GRIDFEED_RETURN_IF_ERROR(ValidateMixture(o));
  if (d.is_sft()) GRIDFEED_RETURN_IF_ERROR(ValidateSft(o));
  if (d.is_fim()) GRIDFEED_RETURN_IF_ERROR(ValidateFim(o));
  if (d.is_olmo()) {
    GRIDFEED_RETURN_IF_ERROR(ValidateOlmo(o));
  } else if (!d.is_sft()) {  // SFT draws nothing: its seed only names the datasets
    GRIDFEED_RETURN_IF_ERROR(Range("seed", d.seed, 0, 0xffffffffLL, "in [0, 2^32)"));
  }
  const std::pair<const char*, const std::string*> counts[] = {
      {"--train-samples", &d.train_samples},
      {"--valid-samples", &d.valid_samples},
      {"--test-samples", &d.test_samples}};
  for (const auto& [flag, value] : counts) {
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, ParseSampleCount(flag, *value));
    // Tokens a split needs (n * seq_length + 1) must fit in int64.
    if (n > 0 && n > (std::numeric_limits<int64_t>::max() - 1) / d.seq_length) {
      return InvalidArgument(std::string(flag) + " " + *value + " x --seq-length " +
                             std::to_string(d.seq_length) + " overflows a 64-bit token count");
    }
  }
  GRIDFEED_RETURN_IF_ERROR(Range("vocab-size", d.vocab_size, 0, int64_t{1} << 40, ">= 0"));
  GRIDFEED_RETURN_IF_ERROR(Range("eod-id", d.eod_id, 0, int64_t{1} << 40, ">= 0"));
  GRIDFEED_RETURN_IF_ERROR(Range("pad-id", d.pad_id, -1, int64_t{1} << 40, ">= -1"));
  if (!std::isfinite(d.mid_level_dataset_surplus) || d.mid_level_dataset_surplus < 0) {
    return InvalidArgument("--mid-level-dataset-surplus must be finite and >= 0, got " +
                           NumberText(d.mid_level_dataset_surplus));
  }
  const auto& g = o.grid;
  constexpr int64_t kMaxRanks = int64_t{1} << 24;
  GRIDFEED_RETURN_IF_ERROR(
      Range("tensor-model-parallel-size", g.tensor_model_parallel_size, 1, kMaxRanks, ">= 1"));
  GRIDFEED_RETURN_IF_ERROR(
      Range("pipeline-model-parallel-size", g.pipeline_model_parallel_size, 1, kMaxRanks, ">= 1"));
  GRIDFEED_RETURN_IF_ERROR(
      Range("context-parallel-size", g.context_parallel_size, 1, kMaxRanks, ">= 1"));
  GRIDFEED_RETURN_IF_ERROR(Range("data-parallel-size", g.data_parallel_size, 0, kMaxRanks, ">= 0"));
  const int64_t cp = g.context_parallel_size;
  if (cp > 1 && d.seq_length % (2 * cp) != 0) {
    return InvalidArgument(
        "--seq-length " + std::to_string(d.seq_length) +
        " must be divisible by 2 x --context-parallel-size = " + std::to_string(2 * cp));
  }
  constexpr int64_t kMaxBatch = int64_t{1} << 40;
  GRIDFEED_RETURN_IF_ERROR(
      Range("micro-batch-size", o.batch.micro_batch_size, 1, kMaxBatch, "in [1, 2^40]"));
  GRIDFEED_RETURN_IF_ERROR(
      Range("global-batch-size", o.batch.global_batch_size, 0, kMaxBatch, "in [0, 2^40]"));
  GRIDFEED_RETURN_IF_ERROR(Range("consumed-samples", o.resume.consumed_samples, 0,
                                 std::numeric_limits<int64_t>::max() / 2, ">= 0"));
  GRIDFEED_RETURN_IF_ERROR(
      Range("prefetch-depth", o.feed.prefetch_depth, 1, 1 << 16, "in [1, 65536]"));
  GRIDFEED_RETURN_IF_ERROR(Range("train-iters", o.run.train_iters, 0, kMaxBatch, "in [0, 2^40]"));
  GRIDFEED_RETURN_IF_ERROR(Range("save-interval", o.run.save_interval, 0, kMaxBatch, ">= 0"));
  return Status::Ok();
}

Result<int64_t> ValidateGrid(const JobOptions& o, int64_t world_size) {
  GRIDFEED_RETURN_IF_ERROR(Validate(o));
  const auto& g = o.grid;
  const int64_t model =
      g.tensor_model_parallel_size * g.pipeline_model_parallel_size * g.context_parallel_size;
  if (world_size <= 0 || model > world_size || world_size % model != 0) {
    return InvalidArgument("world size " + std::to_string(world_size) +
                           " is not divisible by --tensor-model-parallel-size x "
                           "--pipeline-model-parallel-size x --context-parallel-size = " +
                           std::to_string(model));
  }
  const int64_t dp = world_size / model;
  if (g.data_parallel_size != 0 && g.data_parallel_size != dp) {
    return InvalidArgument("--data-parallel-size " + std::to_string(g.data_parallel_size) +
                           " does not match world size / (TP x PP x CP) = " + std::to_string(dp));
  }
  // Testing options that name ranks or nodes.
  GRIDFEED_RETURN_IF_ERROR(Range("testing-ranks-per-node", o.feed.testing_ranks_per_node, 0,
                                 world_size, "in [0, world size]"));
  GRIDFEED_RETURN_IF_ERROR(Range("testing-corrupt-image-node", o.feed.testing_corrupt_image_node,
                                 -1, world_size - 1, "in [-1, world size)"));
  GRIDFEED_RETURN_IF_ERROR(Range("testing-fail-node-image", o.feed.testing_fail_node_image, -1,
                                 world_size - 1, "in [-1, world size)"));
  // Node 0 is world rank 0's own: it receives nothing, so failing it would test nothing.
  for (const auto& [name, node] :
       {std::pair{"testing-fail-node-receive", o.feed.testing_fail_node_receive},
        std::pair{"testing-fail-node-send", o.feed.testing_fail_node_send}}) {
    if (node != -1) {
      GRIDFEED_RETURN_IF_ERROR(Range(name, node, 1, world_size - 1,
                                     "in [1, world size) or -1 (node 0 is rank 0's own)"));
    }
  }
  const int64_t mbs = FeederMicroBatchSize(o, dp);
  const int64_t step = mbs * dp;  // both below 2^40 and 2^24: no overflow
  const int64_t gbs = o.batch.global_batch_size ? o.batch.global_batch_size : step;
  if (gbs % step != 0) {
    return InvalidArgument("--global-batch-size " + std::to_string(gbs) +
                           " is not a multiple of --micro-batch-size x DP = " +
                           std::to_string(mbs) + " x " + std::to_string(dp));
  }
  GRIDFEED_RETURN_IF_ERROR(CheckDeviceTrainBatchSize(o, dp));
  return dp;
}

int64_t FeederMicroBatchSize(const JobOptions& o, int64_t dp) {
  const int64_t mbs = o.batch.micro_batch_size, gbs = o.batch.global_batch_size;
  if (!o.data.is_olmo() || mbs < 1 || dp < 1 || gbs < 1 || gbs % dp != 0) return mbs;
  return OlmoFeederMicroBatch(mbs, gbs / dp);
}

Status CheckDeviceTrainBatchSize(const JobOptions& o, int64_t dp) {
  const int64_t device = o.batch.device_train_batch_size;
  if (device == 0) return Status::Ok();
  const int64_t gbs =
      o.batch.global_batch_size ? o.batch.global_batch_size : FeederMicroBatchSize(o, dp) * dp;
  if (dp >= 1 && gbs % dp == 0 && gbs / dp == device) return Status::Ok();
  return InvalidArgument(
      "--device-train-batch-size " + std::to_string(device) +
      " (device_train_batch_size) is not --global-batch-size / DP = " + std::to_string(gbs) +
      " / " + std::to_string(dp) + " (set --data-parallel-size to the DP size it was written for)");
}

}  // namespace gridfeed::config
