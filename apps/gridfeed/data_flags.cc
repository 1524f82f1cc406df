#include "data_flags.h"

#include <cstdio>

#include "gridfeed/core/log.h"

namespace gridfeed::app {

using config::DataOptions;

void DataFlags::AddFlags(
    CLI::App& app, DataOptions& o,
    std::vector<std::pair<CLI::Option*, std::function<void(const DataOptions&, DataOptions&)>>>*
        copies) {
  auto opt = [&](const std::string& name, auto DataOptions::*member, const std::string& desc) {
    CLI::Option* option = app.add_option(name, o.*member, desc);
    if (copies)
      copies->push_back(
          {option, [member](const DataOptions& a, DataOptions& b) { b.*member = a.*member; }});
    return option;
  };
  auto flag = [&](const std::string& name, bool DataOptions::*member, const std::string& desc) {
    CLI::Option* option = app.add_flag(name, o.*member, desc);
    if (copies)
      copies->push_back(
          {option, [member](const DataOptions& a, DataOptions& b) { b.*member = a.*member; }});
  };
  opt("--data-path", &DataOptions::data_path, "[W1] PREFIX1 [W2 PREFIX2 ...]");
  opt("--train-data-path", &DataOptions::train_data_path, "Per-split blend for train");
  opt("--valid-data-path", &DataOptions::valid_data_path, "Per-split blend for valid");
  opt("--test-data-path", &DataOptions::test_data_path, "Per-split blend for test");
  opt("--split", &DataOptions::split, "e.g. 969,30,1 (default with --data-path: 969, 30, 1)");
  opt("--seq-length", &DataOptions::seq_length, "Sequence length in tokens");
  opt("--seed", &DataOptions::seed, "Random seed (default 1234)");
  opt("--train-samples", &DataOptions::train_samples, "N or none");
  opt("--valid-samples", &DataOptions::valid_samples, "N or none");
  opt("--test-samples", &DataOptions::test_samples, "N or none");
  opt("--vocab-size", &DataOptions::vocab_size, "Vocabulary size");
  opt("--eod-id", &DataOptions::eod_id, "End-of-document token id (default 0)");
  opt("--pad-id", &DataOptions::pad_id, "Pad token id (default -1 = none)");
  flag("--reset-position-ids", &DataOptions::reset_position_ids, "Restart positions after EOD");
  flag("--reset-attention-mask", &DataOptions::reset_attention_mask, "Mask across EOD");
  flag("--eod-mask-loss", &DataOptions::eod_mask_loss, "No loss on EOD input tokens");
  flag("--create-attention-mask", &DataOptions::create_attention_mask, "Build attention masks");
  flag("--no-add-extra-token", &DataOptions::no_add_extra_token,
       "Samples of seq_length tokens (labels rotated)");
  flag("--no-drop-last-partial-validation-sequence",
       &DataOptions::no_drop_last_partial_validation_sequence, "Keep a padded last valid sample");
  opt("--mid-level-dataset-surplus", &DataOptions::mid_level_dataset_surplus,
      "Extra samples per blend source (default 0.005)");
}

DataFlags::DataFlags(CLI::App* sub) {
  sub->add_option("--config", config_path_, "YAML file of the same options (flags override)");
  AddFlags(*sub, *cli_, &copies_);
}

Result<DataOptions> DataFlags::Resolve() const {
  if (config_path_.empty()) return *cli_;
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<std::string> args, config::YamlToArgs(config_path_));
  DataOptions from_yaml;
  CLI::App parser{"config"};
  AddFlags(parser, from_yaml, nullptr);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed list
  try {
    parser.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument("config '" + config_path_ + "': " + e.what());
  }
  for (const auto& [option, copy] : copies_) {
    if (option->count() > 0) copy(*cli_, from_yaml);
  }
  return from_yaml;
}

}  // namespace gridfeed::app
