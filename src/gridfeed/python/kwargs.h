// Python keywords <-> the option table (config/options.h). A keyword is a row's name with '-'
// replaced by '_' (seq_length, tensor_model_parallel_size, ...); `config=` names a YAML file
// read with config::ApplyYaml, as --config does; keywords override it, as flags do. Every
// function that takes options goes through here, so Python accepts exactly the CLI's options
// (the rows of the function's groups), with the CLI's validation, errors and fingerprints.
// REQUIRES: the GIL is held. Errors are returned as Status (not raised), so that a collective
// caller can agree on them first.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::python {

// The keyword of a row: its name with '-' -> '_'.
std::string KeywordOf(const config::OptionRow& row);

// `config` (a path or None) and then every keyword of `kwargs` applied to the defaults.
// InvalidArgument naming `function`, the keyword and its flag for an unknown keyword, one of
// another group, or a value of the wrong type. None leaves a value as it is. Not validated.
Result<config::JobOptions> OptionsFromKwargs(const char* function, const pybind11::kwargs& kwargs,
                                             config::Groups groups);

// The options of `groups` as {keyword: value} (int, float, bool, str, list of str).
pybind11::dict OptionsDict(const config::JobOptions& o, config::Groups groups);

// Every row of the table: keyword, flag, type, default, group, help, choices, decides_order,
// hidden.
pybind11::list OptionTableList();

}  // namespace gridfeed::python
