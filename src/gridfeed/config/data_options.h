// The data options of gridfeed, named like Megatron's flags (a YAML key is the flag name
// without its leading dashes). Defaults are Megatron's where Megatron has one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::config {

struct DataOptions {
  std::vector<std::string> data_path;        // --data-path [W1] P1 [W2 P2 ...]
  std::vector<std::string> train_data_path;  // --train-data-path (per-split blends)
  std::vector<std::string> valid_data_path;
  std::vector<std::string> test_data_path;
  std::string split;                   // --split; empty = legacy "969, 30, 1"
  int64_t seq_length = 0;              // --seq-length (required)
  int64_t seed = 1234;                 // --seed
  std::string train_samples = "none";  // N or "none" (one epoch / exhaustive)
  std::string valid_samples = "none";
  std::string test_samples = "none";
  int64_t vocab_size = 0;  // --vocab-size (informational; 0 = unknown)
  int64_t eod_id = 0;      // --eod-id
  int64_t pad_id = -1;     // --pad-id (-1 = none)
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool create_attention_mask = false;
  bool no_add_extra_token = false;
  bool no_drop_last_partial_validation_sequence = false;
  double mid_level_dataset_surplus = 0.005;
};

// Turns a YAML mapping into command-line tokens ("--key", values...): scalars become one
// value, lists several, `true` a bare flag, `false` nothing. InvalidArgument on other shapes.
Result<std::vector<std::string>> YamlToArgs(const std::string& path);

// "none" -> -1, else a non-negative integer. InvalidArgument names the flag.
Result<int64_t> ParseSampleCount(const std::string& flag, const std::string& value);

}  // namespace gridfeed::config

namespace gridfeed::config {

// Every option as canonical JSON (sorted keys): equal text = equal configuration.
std::string CanonicalText(const DataOptions& o);

}  // namespace gridfeed::config
