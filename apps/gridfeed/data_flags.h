// Megatron-style data flags shared by `tables` and `samples`, with --config YAML (flags on
// the command line override the file).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "gridfeed/config/data_options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/feed/data_build.h"

namespace gridfeed::app {

class DataFlags {
 public:
  // Adds every data flag and --config to `sub`.
  explicit DataFlags(CLI::App* sub);
  // After parsing: YAML defaults, overridden by the flags given.
  Result<config::DataOptions> Resolve() const;

 private:
  static void AddFlags(
      CLI::App& app, config::DataOptions& o,
      std::vector<std::pair<CLI::Option*,
                            std::function<void(const config::DataOptions&, config::DataOptions&)>>>*
          copies);
  std::unique_ptr<config::DataOptions> cli_ = std::make_unique<config::DataOptions>();
  std::string config_path_;
  std::vector<std::pair<CLI::Option*,
                        std::function<void(const config::DataOptions&, config::DataOptions&)>>>
      copies_;
};

using feed::BuildFromOptions;
using feed::ToSampleOptions;

}  // namespace gridfeed::app
