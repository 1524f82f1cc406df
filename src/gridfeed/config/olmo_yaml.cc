#include "gridfeed/config/olmo_yaml.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/core/nearest_name.h"
#include "gridfeed/core/parse.h"

namespace gridfeed::config {
namespace {

// The fields of OLMo's configuration classes (olmo/config.py at the version the design note
// names): the keys an OLMo YAML may hold. Nested mappings other than model, data and
// data.instance_filter are not looked into (none of them affects the data).
const std::vector<std::string>& TrainConfigKeys() {
  static const std::vector<std::string> keys = {"run_name",
                                                "seed",
                                                "epoch",
                                                "dry_run",
                                                "model",
                                                "optimizer",
                                                "scheduler",
                                                "data",
                                                "restore_dataloader",
                                                "fast_forward_batches",
                                                "evaluators",
                                                "eval_interval",
                                                "tokenizer",
                                                "save_folder",
                                                "remote_save_folder",
                                                "canceled_check_interval",
                                                "save_interval",
                                                "save_interval_unsharded",
                                                "save_interval_ephemeral",
                                                "save_num_checkpoints_to_keep",
                                                "save_num_unsharded_checkpoints_to_keep",
                                                "save_overwrite",
                                                "force_save_unsharded",
                                                "no_pre_train_checkpoint",
                                                "load_path",
                                                "load_path_sharded_checkpointer",
                                                "try_load_latest_save",
                                                "reset_optimizer_state",
                                                "reset_trainer_state",
                                                "sharded_checkpointer",
                                                "new_style_checkpoints",
                                                "max_duration",
                                                "global_train_batch_size",
                                                "device_train_batch_size",
                                                "device_train_microbatch_size",
                                                "device_eval_batch_size",
                                                "eval_subset_num_batches",
                                                "eval_on_load",
                                                "device_train_grad_accum",
                                                "max_grad_norm",
                                                "max_grad_norm_ratio",
                                                "precision",
                                                "wandb",
                                                "speed_monitor",
                                                "console_log_interval",
                                                "gen1_gc_interval",
                                                "compile",
                                                "distributed_strategy",
                                                "fsdp",
                                                "ddp",
                                                "single",
                                                "softmax_auxiliary_loss",
                                                "auxiliary_loss_multiplier",
                                                "time_limit",
                                                "extra_steps_after_cancel",
                                                "early_stopping_factor",
                                                "save_data_indices",
                                                "python_profiling",
                                                "torch_profiling",
                                                "stop_at",
                                                "stop_after",
                                                "activation_checkpointing",
                                                "fused_loss",
                                                "hf_datasets_cache_dir",
                                                "module_outputs_save_steps"};
  return keys;
}
const std::vector<std::string>& ModelConfigKeys() {
  static const std::vector<std::string> keys = {"d_model",
                                                "n_heads",
                                                "n_kv_heads",
                                                "clip_qkv",
                                                "n_layers",
                                                "mlp_ratio",
                                                "mlp_hidden_size",
                                                "activation_type",
                                                "block_type",
                                                "block_group_size",
                                                "alibi",
                                                "alibi_bias_max",
                                                "rope",
                                                "rope_full_precision",
                                                "rope_theta",
                                                "flash_attention",
                                                "attention_dropout",
                                                "multi_query_attention",
                                                "attention_layer_norm",
                                                "residual_dropout",
                                                "embedding_dropout",
                                                "embedding_layer_norm",
                                                "layer_norm_type",
                                                "layer_norm_with_affine",
                                                "layer_norm_eps",
                                                "attention_layer_norm_with_affine",
                                                "max_sequence_length",
                                                "include_bias",
                                                "bias_for_layer_norm",
                                                "scale_logits",
                                                "vocab_size",
                                                "embedding_size",
                                                "weight_tying",
                                                "eos_token_id",
                                                "pad_token_id",
                                                "init_device",
                                                "init_fn",
                                                "init_std",
                                                "init_cutoff_factor",
                                                "precision",
                                                "scale_emb_init",
                                                "emb_init_std",
                                                "norm_after"};
  return keys;
}
const std::vector<std::string>& DataConfigKeys() {
  static const std::vector<std::string> keys = {"paths",
                                                "memmap_dtype",
                                                "datasets",
                                                "label_mask_paths",
                                                "pad_direction",
                                                "generate_attention_mask",
                                                "generate_doc_lengths",
                                                "num_workers",
                                                "drop_last",
                                                "pin_memory",
                                                "prefetch_factor",
                                                "persistent_workers",
                                                "timeout",
                                                "seed",
                                                "instance_filter",
                                                "custom_dataset"};
  return keys;
}
const std::vector<std::string>& InstanceFilterKeys() {
  static const std::vector<std::string> keys = {"repetition_max_period", "repetition_min_period",
                                                "repetition_max_count"};
  return keys;
}

bool Contains(const std::vector<std::string>& keys, const std::string& k) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

// A gridfeed option or mixture key, in either spelling ('-' or '_'); with OLMo's equivalent
// where there is one.
bool IsGridfeedKey(const std::string& k, std::string* olmo_equivalent) {
  std::string dashed = k, underscored = k;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  if (FindRow(dashed) == nullptr && !IsMixtureKey(underscored)) return false;
  static const std::map<std::string, std::string> equivalent = {
      {"seq-length", "model.max_sequence_length"},
      {"global-batch-size", "global_train_batch_size"},
      {"micro-batch-size", "device_train_microbatch_size"},
      {"eod-id", "model.eos_token_id"},
      {"pad-id", "model.pad_token_id"},
      {"data-path", "data.paths"},
      {"olmo-paths", "data.paths"},
      {"olmo-epoch", "epoch"}};
  const auto it = equivalent.find(dashed);
  *olmo_equivalent = it == equivalent.end() ? "" : it->second;
  return true;
}

// OLMo's defaults (olmo/config.py) for the keys gridfeed reads.
constexpr const char* kOlmoSeed = "6198";
constexpr int64_t kOlmoMaxSequenceLength = 1024;
constexpr int64_t kOlmoTokenId = 50256;  // eos_token_id and pad_token_id
constexpr int64_t kOlmoGlobalBatch = 512;
constexpr int64_t kOlmoMicroBatch = 16;

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  Status Error(const std::string& key, const std::string& what) const {
    return InvalidArgument("OLMo config '" + path_ + "': key '" + key + "' " + what);
  }
  Result<int64_t> Int(const std::string& key, const YAML::Node& v) const {
    if (!v.IsScalar()) return Error(key, "must be an integer");
    const auto n = ParseInt64(v.Scalar());
    if (!n) return Error(key, "must be an integer, got '" + v.Scalar() + "'");
    return *n;
  }
  // A seed as OLMo takes it: a non-negative integer of any size (decimal).
  Result<std::string> SeedText(const std::string& key, const YAML::Node& v) const {
    if (!v.IsScalar()) return Error(key, "must be a non-negative integer");
    std::string t = v.Scalar();
    if (!t.empty() && t[0] == '+') t.erase(0, 1);
    if (t.empty() || t.size() > kMaxOlmoSeedDigits ||
        !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Error(key,
                   "must be a non-negative integer (numpy's SeedSequence takes any size), "
                   "got '" +
                       v.Scalar().substr(0, 80) + "'");
    }
    return t;
  }
  Status Unknown(const std::string& key, const std::string& leaf, const std::string& what,
                 const std::vector<std::string>& valid) const {
    return Error(key, "is not a key of OLMo's " + what + DidYouMean(leaf, valid));
  }
  Result<bool> Bool(const std::string& key, const YAML::Node& v) const {
    if (v.IsScalar()) {
      const std::string& s = v.Scalar();
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
    }
    return Error(key, "must be true or false");
  }
  Result<std::string> Text(const std::string& key, const YAML::Node& v) const {
    if (!v.IsScalar()) return Error(key, "must be a single value");
    return v.Scalar();
  }
  Result<std::vector<std::string>> List(const std::string& key, const YAML::Node& v) const {
    if (!v.IsSequence()) return Error(key, "must be a list of paths");
    std::vector<std::string> out;
    for (const auto& item : v) {
      if (!item.IsScalar()) return Error(key, "must be a flat list of paths");
      out.push_back(item.Scalar());
    }
    return out;
  }

 private:
  std::string path_;
};

// Keys of OLMo's DataConfig that do not change what is read or its order.
bool IsInertDataKey(const std::string& k) {
  return k == "pin_memory" || k == "prefetch_factor" || k == "persistent_workers" || k == "timeout";
}

Status ApplyInstanceFilter(const Reader& r, const YAML::Node& v, DataOptions* d) {
  d->olmo_instance_filter = true;
  if (!v.IsMap()) return r.Error("data.instance_filter", "must be a mapping or null");
  for (const auto& kv : v) {
    const std::string k = kv.first.Scalar();
    const std::string key = "data.instance_filter." + k;
    if (kv.second.IsNull()) continue;
    int64_t* field = k == "repetition_max_period"   ? &d->olmo_repetition_max_period
                     : k == "repetition_min_period" ? &d->olmo_repetition_min_period
                     : k == "repetition_max_count"  ? &d->olmo_repetition_max_count
                                                    : nullptr;
    if (field == nullptr) return r.Unknown(key, k, "InstanceFilterConfig", InstanceFilterKeys());
    GRIDFEED_ASSIGN_OR_RETURN(*field, r.Int(key, kv.second));
  }
  return Status::Ok();
}

Status ApplyData(const Reader& r, const YAML::Node& data, JobOptions* o, std::string* data_seed,
                 std::vector<std::string>* ignored) {
  DataOptions& d = o->data;
  bool has_paths = false, has_datasets = false;
  for (const auto& kv : data) {
    const std::string k = kv.first.Scalar();
    const std::string key = "data." + k;
    const YAML::Node& v = kv.second;
    if (k == "num_threads") {
      return r.Error(key,
                     "is not a key of OLMo's DataConfig (OLMo refuses it: num_threads is an "
                     "argument of its IterableDataset, and never changes the order)");
    }
    if (!Contains(DataConfigKeys(), k)) return r.Unknown(key, k, "DataConfig", DataConfigKeys());
    if (IsInertDataKey(k)) {
      ignored->push_back(key);
      continue;
    }
    if (v.IsNull()) continue;
    if (k == "paths") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_paths, r.List(key, v));
      d.olmo_path_labels.clear();
      has_paths = !d.olmo_paths.empty();
    } else if (k == "datasets") {
      if (!v.IsMap()) return r.Error(key, "must be a mapping of label to a list of paths");
      std::map<std::string, std::vector<std::string>> by_label;  // OLMo sorts the labels
      for (const auto& entry : v) {
        const std::string label = entry.first.Scalar();
        GRIDFEED_ASSIGN_OR_RETURN(by_label[label], r.List(key + "." + label, entry.second));
      }
      for (const auto& [label, paths] : by_label) {
        for (const auto& p : paths) {
          d.olmo_paths.push_back(p);
          d.olmo_path_labels.push_back(label);
        }
      }
      has_datasets = true;
    } else if (k == "label_mask_paths") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_label_mask_paths, r.List(key, v));
    } else if (k == "memmap_dtype") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_memmap_dtype, r.Text(key, v));
    } else if (k == "drop_last") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_drop_last, r.Bool(key, v));
    } else if (k == "seed") {
      GRIDFEED_ASSIGN_OR_RETURN(*data_seed, r.SeedText(key, v));
    } else if (k == "num_workers") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_num_workers, r.Int(key, v));
    } else if (k == "generate_attention_mask") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_generate_attention_mask, r.Bool(key, v));
    } else if (k == "generate_doc_lengths") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_generate_doc_lengths, r.Bool(key, v));
    } else if (k == "instance_filter") {
      GRIDFEED_RETURN_IF_ERROR(ApplyInstanceFilter(r, v, &d));
    } else if (k == "pad_direction") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_pad_direction, r.Text(key, v));
    } else if (k == "custom_dataset") {
      return r.Error(key, "(a custom dataset class) is not supported: gridfeed reads token files");
    } else {
      return r.Error(key, "is a key of OLMo's DataConfig that gridfeed does not read");
    }
  }
  if (has_paths && has_datasets) {
    return r.Error("data.paths", "and data.datasets are mutually exclusive (as in OLMo)");
  }
  if (d.olmo_paths.empty()) {
    return r.Error("data.paths", "(or data.datasets) lists no token file");
  }
  return Status::Ok();
}

Status ApplyModel(const Reader& r, const YAML::Node& model, JobOptions* o,
                  std::vector<std::string>* ignored) {
  if (!model.IsMap()) return r.Error("model", "must be a mapping");
  for (const auto& kv : model) {
    const std::string k = kv.first.Scalar();
    const std::string key = "model." + k;
    int64_t* field = k == "max_sequence_length" ? &o->data.seq_length
                     : k == "eos_token_id"      ? &o->data.eod_id
                     : k == "pad_token_id"      ? &o->data.pad_id
                                                : nullptr;
    if (!Contains(ModelConfigKeys(), k)) return r.Unknown(key, k, "ModelConfig", ModelConfigKeys());
    if (field == nullptr) {
      ignored->push_back(key);
      continue;
    }
    if (kv.second.IsNull()) return r.Error(key, "must be an integer");
    GRIDFEED_ASSIGN_OR_RETURN(*field, r.Int(key, kv.second));
  }
  return Status::Ok();
}

}  // namespace

bool IsOlmoConfig(const YAML::Node& root) {
  if (!root.IsMap()) return false;
  const YAML::Node data = root["data"];
  return data && data.IsMap() && (data["paths"] || data["datasets"]);
}

Status ApplyOlmoYaml(const std::string& path, const YAML::Node& root, JobOptions* o,
                     std::vector<std::string>* ignored) {
  const Reader r(path);
  // OLMo's defaults first; the file then overrides them.
  o->data.seq_length = kOlmoMaxSequenceLength;
  o->data.eod_id = kOlmoTokenId;
  o->data.pad_id = kOlmoTokenId;
  o->batch.global_batch_size = kOlmoGlobalBatch;
  o->batch.micro_batch_size = kOlmoMicroBatch;
  std::string train_seed = kOlmoSeed, data_seed;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar())
      return InvalidArgument("OLMo config '" + path + "': a key is not a name");
    const std::string k = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (!Contains(TrainConfigKeys(), k)) {
      std::string olmo;
      if (IsGridfeedKey(k, &olmo)) {
        return r.Error(k,
                       "is gridfeed's, not a key of OLMo's TrainConfig: an OLMo config "
                       "(data.paths/data.datasets) takes OLMo's keys only" +
                           (olmo.empty() ? std::string(" (give gridfeed's options as flags)")
                                         : " (OLMo's is '" + olmo + "')"));
      }
      return r.Unknown(k, k, "TrainConfig", TrainConfigKeys());
    }
    if (k == "data") {
      GRIDFEED_RETURN_IF_ERROR(ApplyData(r, v, o, &data_seed, ignored));
    } else if (k == "model") {
      GRIDFEED_RETURN_IF_ERROR(ApplyModel(r, v, o, ignored));
    } else if (v.IsNull()) {
      if (k != "epoch" && k != "device_train_batch_size") ignored->push_back(k);
    } else if (k == "seed") {
      GRIDFEED_ASSIGN_OR_RETURN(train_seed, r.SeedText(k, v));
    } else if (k == "epoch") {
      GRIDFEED_ASSIGN_OR_RETURN(o->data.olmo_epoch, r.Int(k, v));
    } else if (k == "global_train_batch_size") {
      GRIDFEED_ASSIGN_OR_RETURN(o->batch.global_batch_size, r.Int(k, v));
    } else if (k == "device_train_batch_size") {
      GRIDFEED_ASSIGN_OR_RETURN(o->batch.device_train_batch_size, r.Int(k, v));
    } else if (k == "device_train_microbatch_size") {
      GRIDFEED_ASSIGN_OR_RETURN(o->batch.micro_batch_size, r.Int(k, v));
    } else {
      ignored->push_back(k);
    }
  }
  // data.seed, when set, overrides the train seed (build_train_dataloader).
  const bool from_data = !data_seed.empty();
  return SetOlmoSeed(from_data ? "data.seed" : "seed", from_data ? data_seed : train_seed, &o->data)
      .WithContext("OLMo config '" + path + "'");
}

int64_t OlmoFeederMicroBatch(int64_t requested, int64_t device_batch) {
  if (requested >= device_batch) return device_batch;
  if (device_batch % requested == 0) return requested;
  return std::gcd(requested, device_batch);
}

Status SetOlmoSeed(const std::string& key, const std::string& text, DataOptions* d) {
  std::string t = text;
  if (t.empty() || t.size() > kMaxOlmoSeedDigits ||
      !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgument("'" + key + "' must be a non-negative decimal integer of at most " +
                           std::to_string(kMaxOlmoSeedDigits) + " digits, got '" +
                           text.substr(0, 80) + "'");
  }
  t.erase(0, std::min(t.find_first_not_of('0'), t.size() - 1));  // 007 -> 7, 0 stays
  const auto n = ParseInt64(t);
  if (n && *n <= kMaxInt64Seed) {
    d->seed = *n;
    d->olmo_seed.clear();
  } else {
    d->seed = 0;
    d->olmo_seed = t;
  }
  return Status::Ok();
}

}  // namespace gridfeed::config
