// OLMo's own training YAML as a gridfeed configuration. A file whose top-level `data:` mapping
// holds `paths` or `datasets` is an OLMo configuration; its data-related keys map onto option
// rows (seed, epoch, global/device batch sizes, model.max_sequence_length/eos/pad ids, data.*),
// keys that do not affect the data (optimizer, model width, ...) are ignored and listed once,
// unknown data.* keys are an error naming the key. data.datasets labels are sorted as OLMo
// sorts them. Paths stay as written (relative to the working directory, like OLMo).
// Not thread safe (logging only).
#pragma once

#include <yaml-cpp/yaml.h>

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

}  // namespace gridfeed::config
