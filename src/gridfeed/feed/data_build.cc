#include "gridfeed/feed/data_build.h"

#include <cstdio>

#include "gridfeed/core/log.h"

namespace gridfeed::feed {

using config::DataOptions;

Result<order::DatasetConfig> ToDatasetConfig(const DataOptions& o) {
  order::DatasetConfig c;
  if (!o.data_path.empty()) c.data_path = o.data_path;
  if (!o.train_data_path.empty()) c.split_paths[0] = o.train_data_path;
  if (!o.valid_data_path.empty()) c.split_paths[1] = o.valid_data_path;
  if (!o.test_data_path.empty()) c.split_paths[2] = o.test_data_path;
  if (!o.split.empty()) c.split = o.split;
  const std::string names[3] = {"--train-samples", "--valid-samples", "--test-samples"};
  const std::string values[3] = {o.train_samples, o.valid_samples, o.test_samples};
  for (int i = 0; i < 3; ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, config::ParseSampleCount(names[i], values[i]));
    if (n >= 0) c.sizes[i] = n;
  }
  if (o.seed < 0 || o.seed > 0xffffffffLL) {
    return InvalidArgument("--seed must be in [0, 2^32), got " + std::to_string(o.seed));
  }
  if (o.seq_length <= 0) return InvalidArgument("--seq-length must be given and positive");
  c.seed = static_cast<uint32_t>(o.seed);
  c.seq_length = o.seq_length;
  c.eod_id = o.eod_id;
  c.pad_id = o.pad_id;
  c.add_extra_token = !o.no_add_extra_token;
  c.drop_last_partial_validation_sequence = !o.no_drop_last_partial_validation_sequence;
  c.mid_level_dataset_surplus = o.mid_level_dataset_surplus;
  return c;
}

order::SampleOptions ToSampleOptions(const DataOptions& o, int64_t pad_id_used) {
  order::SampleOptions s;
  s.seq_length = o.seq_length;
  s.add_extra_token = !o.no_add_extra_token;
  s.eod_id = o.eod_id;
  s.pad_id = pad_id_used;
  s.reset_position_ids = o.reset_position_ids;
  s.reset_attention_mask = o.reset_attention_mask;
  s.eod_mask_loss = o.eod_mask_loss;
  s.create_attention_mask = o.create_attention_mask;
  return s;
}

Result<order::BuiltDatasets> BuildFromOptions(const DataOptions& o) {
  GRIDFEED_ASSIGN_OR_RETURN(order::DatasetConfig c, ToDatasetConfig(o));
  GRIDFEED_ASSIGN_OR_RETURN(order::BuiltDatasets b, order::BuildDatasets(c));
  for (const auto& w : b.warnings) log::Warn(w);
  double doc = 0, sample = 0, shuffle = 0;
  for (const auto& s : b.splits) {
    if (!s) continue;
    for (const auto& m : s->mids) {
      doc += m.times.document_index;
      sample += m.times.sample_index;
      shuffle += m.times.shuffle_index;
    }
  }
  char line[256];
  std::snprintf(line, sizeof(line),
                "tables built: open %.3f s, tables %.3f s (document_index %.3f, sample_index %.3f, "
                "shuffle_index %.3f, summed over datasets), blend %.3f s",
                b.seconds_open, b.seconds_tables, doc, sample, shuffle, b.seconds_blend);
  log::Info(line);
  return b;
}

}  // namespace gridfeed::feed
