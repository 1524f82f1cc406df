// OLMo's own training YAML as a gridfeed configuration. A file whose top-level `data:` mapping
// holds `paths` or `datasets` is an OLMo configuration. It is read as OLMo reads it (olmo/
// config.py: TrainConfig, ModelConfig, DataConfig, InstanceFilterConfig): every key must be one
// of OLMo's, else InvalidArgument names it with the nearest valid key; gridfeed's own keys
// (`seq-length`, `sources`, ...) are refused, not dropped. Data-related keys map onto option rows
// (seed of any size, epoch, global/device batch sizes, device_train_microbatch_size,
// model.max_sequence_length/eos/pad ids, data.*); OLMo's keys that do not affect the data
// (optimizer, model width, ...) are ignored and listed once. data.datasets labels are sorted as
// OLMo sorts them. Paths stay as written (relative to the working directory, like OLMo).
// Not thread safe (logging only).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::config {

bool IsOlmoConfig(const YAML::Node& root);

// Applies an OLMo configuration to `o`; `ignored` receives the keys that were skipped
// (dotted, e.g. "optimizer.learning_rate"). InvalidArgument names the file and the key.
Status ApplyOlmoYaml(const std::string& path, const YAML::Node& root, JobOptions* o,
                     std::vector<std::string>* ignored);

// The micro-batch the feeder reads for OLMo's split of a device batch of `device_batch`
// instances into chunks of at most `requested` (the last one smaller): the whole device batch
// when it fits in one chunk, `requested` when it divides the device batch, else
// gcd(requested, device_batch), so that every one of OLMo's chunks is a whole number of
// micro-batches (the feeder's micro-batches have one size). The order of the instances is
// OLMo's whatever the micro-batch. Both arguments >= 1.
int64_t OlmoFeederMicroBatch(int64_t requested, int64_t device_batch);

// --seed's upper bound for an OLMo order; a larger seed is --olmo-seed's.
inline constexpr int64_t kMaxInt64Seed = INT64_MAX / 2;
// Longest --olmo-seed accepted (decimal digits): far beyond any seed people write, and small
// enough that parsing it is instant.
inline constexpr size_t kMaxOlmoSeedDigits = 4096;
// Sets the OLMo seed from its decimal text (any size, as numpy's SeedSequence takes it): a seed
// that fits --seed's range goes there (older canonical texts unchanged), a larger one into
// --olmo-seed with --seed 0. InvalidArgument (naming `key`) for text that is not a
// non-negative decimal integer of at most kMaxOlmoSeedDigits digits.
Status SetOlmoSeed(const std::string& key, const std::string& text, DataOptions* d);

}  // namespace gridfeed::config
