#include "gridfeed/config/olmo_yaml.h"

#include <algorithm>
#include <map>

#include "gridfeed/core/parse.h"

namespace gridfeed::config {
namespace {

// OLMo's defaults (olmo/config.py) for the keys gridfeed reads.
constexpr int64_t kOlmoSeed = 6198;
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
    if (field == nullptr) return r.Error(key, "is not a key of OLMo's InstanceFilterConfig");
    GRIDFEED_ASSIGN_OR_RETURN(*field, r.Int(key, kv.second));
  }
  return Status::Ok();
}

Status ApplyData(const Reader& r, const YAML::Node& data, JobOptions* o, bool* seed_from_data,
                 std::vector<std::string>* ignored) {
  DataOptions& d = o->data;
  bool has_paths = false, has_datasets = false;
  for (const auto& kv : data) {
    const std::string k = kv.first.Scalar();
    const std::string key = "data." + k;
    const YAML::Node& v = kv.second;
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
      GRIDFEED_ASSIGN_OR_RETURN(d.seed, r.Int(key, v));
      *seed_from_data = true;
    } else if (k == "num_workers") {
      GRIDFEED_ASSIGN_OR_RETURN(d.olmo_num_workers, r.Int(key, v));
    } else if (k == "num_threads") {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t threads, r.Int(key, v));
      if (threads < 0) return r.Error(key, "must be >= 0");
      ignored->push_back(key + " (threads never change OLMo's order)");
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
      return r.Error(key, "is not a key of OLMo's DataConfig that gridfeed knows");
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
  o->data.seed = kOlmoSeed;
  o->data.seq_length = kOlmoMaxSequenceLength;
  o->data.eod_id = kOlmoTokenId;
  o->data.pad_id = kOlmoTokenId;
  o->batch.global_batch_size = kOlmoGlobalBatch;
  o->batch.micro_batch_size = kOlmoMicroBatch;
  bool seed_from_data = false;
  int64_t train_seed = kOlmoSeed;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar())
      return InvalidArgument("OLMo config '" + path + "': a key is not a name");
    const std::string k = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (k == "data") {
      GRIDFEED_RETURN_IF_ERROR(ApplyData(r, v, o, &seed_from_data, ignored));
    } else if (k == "model") {
      GRIDFEED_RETURN_IF_ERROR(ApplyModel(r, v, o, ignored));
    } else if (v.IsNull()) {
      if (k != "epoch" && k != "device_train_batch_size") ignored->push_back(k);
    } else if (k == "seed") {
      GRIDFEED_ASSIGN_OR_RETURN(train_seed, r.Int(k, v));
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
  if (!seed_from_data) o->data.seed = train_seed;
  return Status::Ok();
}

}  // namespace gridfeed::config
