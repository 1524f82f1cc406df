// The canonical text of a data order: every option row that decides the order (see
// config/options.h) as JSON with sorted keys, plus the pipeline's facts about the data it read
// (token file sizes and digests) under "data-files". Equal text = equal order. Checkpoints and
// ledgers carry it with its hash (the fingerprint); FromCanonical is its exact inverse.
// Pure functions; thread safe.
#pragma once

#include <string>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::config {

inline constexpr const char* kDataFactsKey = "data-files";

// `data_facts` is a JSON value (text) or empty for none.
std::string CanonicalText(const DataOptions& o, const std::string& data_facts = "");
// The options a canonical text describes. DataLoss for text that is not a JSON object, a key no
// row knows, a missing key of a row that is always written, or a value of the wrong type or
// outside the row's choices: nothing is silently defaulted.
Result<DataOptions> FromCanonical(const std::string& text);
// Hex XXH3-64 of a canonical text.
std::string FingerprintOf(const std::string& canonical);
// Names the first differing field of two canonical texts, e.g. "seed: 1234 -> 99".
std::string DescribeChange(const std::string& before, const std::string& after);
// The --mixture-schedule text of a canonical text ("" without one or for text that is not JSON).
std::string MixtureScheduleOf(const std::string& canonical);
// A canonical text without its mixture schedule and the facts that follow from it (what an
// amendment of the schedule leaves unchanged); "null" for text that is not a JSON object.
std::string WithoutMixtureSchedule(const std::string& canonical);

}  // namespace gridfeed::config
