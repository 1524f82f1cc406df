// Command-line and YAML registration of the option table (config/options.h), shared by every
// program (gridfeed's subcommands, the toy trainer). A YAML file given with --config holds the
// same keys as the flags without their dashes; flags given on the command line override it.
// Not thread safe; use from the program's main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::config {

class OptionFlags {
 public:
  // Adds --config and the rows of `groups` to `app`.
  OptionFlags(CLI::App* app, Groups groups);
  // After parsing: the YAML file's values overridden by the flags given, the files of
  // --data-args-path and the like read (LoadDataArgFiles, config/data_args.h), then Validate().
  // Keys of the YAML file that are no option of `groups` are an error naming the key.
  Result<JobOptions> Resolve() const;
  // As Resolve() without LoadDataArgFiles(), DeriveOptions() and Validate(): the options as
  // given, for tools that check less (e.g. a replay from a ledger).
  Result<JobOptions> ResolveUnchecked() const;

 private:
  Groups groups_;
  std::unique_ptr<JobOptions> cli_ = std::make_unique<JobOptions>();
  std::string config_path_;
  std::vector<std::pair<const OptionRow*, CLI::Option*>> options_;
};

// A command-line parse error as text: CLI11's, except that unknown arguments are named with
// the nearest option of the command they were given to ("unknown option '--seq_length' (did you
// mean '--seq-length'?)").
std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& e);
// What main returns for a parse error, printed as CLI11 prints it (help and version included)
// or, for unknown arguments, as DescribeParseError on stderr. Every program using OptionFlags
// calls it instead of CLI::App::exit.
int ExitOnParseError(const CLI::App& app, const CLI::ParseError& e);

// Applies a YAML mapping of option keys to `o` (only rows of `groups`). InvalidArgument names
// the file and the key for an unknown key (with the nearest valid key) or a value of the wrong
// shape or type.
Status ApplyYaml(const std::string& path, Groups groups, JobOptions* o);

}  // namespace gridfeed::config
