#include "gridfeed/config/data_options.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>

namespace gridfeed::config {

Result<std::vector<std::string>> YamlToArgs(const std::string& path) {
  if (!std::filesystem::exists(path)) return NotFound("no such config file: '" + path + "'");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("cannot parse YAML '" + path + "': " + e.what());
  }
  if (root.IsNull()) return std::vector<std::string>{};
  if (!root.IsMap()) return InvalidArgument("config '" + path + "' is not a mapping of flags");
  std::vector<std::string> args;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    const std::string flag = "--" + key;
    if (v.IsScalar()) {
      const std::string s = v.Scalar();
      if (s == "true" || s == "True") {
        args.push_back(flag);
      } else if (s == "false" || s == "False") {
        continue;
      } else {
        args.push_back(flag);
        args.push_back(s);
      }
    } else if (v.IsSequence()) {
      args.push_back(flag);
      for (const auto& item : v) {
        if (!item.IsScalar()) {
          return InvalidArgument("config '" + path + "': key '" + key + "' must be a flat list");
        }
        args.push_back(item.Scalar());
      }
    } else if (v.IsNull()) {
      continue;
    } else {
      return InvalidArgument("config '" + path + "': key '" + key + "' has a nested mapping");
    }
  }
  return args;
}

Result<int64_t> ParseSampleCount(const std::string& flag, const std::string& value) {
  if (value == "none" || value == "None") return int64_t{-1};
  if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    return InvalidArgument(flag + " must be a non-negative integer or 'none', got '" + value + "'");
  }
  return static_cast<int64_t>(std::stoll(value));
}

}  // namespace gridfeed::config

#include <nlohmann/json.hpp>

namespace gridfeed::config {

std::string CanonicalText(const DataOptions& o) {
  nlohmann::json j = {
      {"data-path", o.data_path},
      {"train-data-path", o.train_data_path},
      {"valid-data-path", o.valid_data_path},
      {"test-data-path", o.test_data_path},
      {"split", o.split},
      {"seq-length", o.seq_length},
      {"seed", o.seed},
      {"train-samples", o.train_samples},
      {"valid-samples", o.valid_samples},
      {"test-samples", o.test_samples},
      {"vocab-size", o.vocab_size},
      {"eod-id", o.eod_id},
      {"pad-id", o.pad_id},
      {"reset-position-ids", o.reset_position_ids},
      {"reset-attention-mask", o.reset_attention_mask},
      {"eod-mask-loss", o.eod_mask_loss},
      {"create-attention-mask", o.create_attention_mask},
      {"no-add-extra-token", o.no_add_extra_token},
      {"no-drop-last-partial-validation-sequence", o.no_drop_last_partial_validation_sequence},
      {"mid-level-dataset-surplus", o.mid_level_dataset_surplus}};
  return j.dump();  // nlohmann::json objects keep keys sorted
}

}  // namespace gridfeed::config
