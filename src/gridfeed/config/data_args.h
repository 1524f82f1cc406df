// Megatron's many-file data flags, with Megatron's formats (megatron/training/utils/
// common_utils.py get_blend_and_blend_per_split, tools/build_sequences_per_dataset.py):
//
//   --data-args-path FILE             the --data-path list as text: "W1 P1 W2 P2 ..." (or only
//                                     prefixes) separated by any whitespace, newlines included.
//   --per-split-data-args-path FILE   JSON {"train": L, "valid": L, "test": L}; each L the
//                                     --train/valid/test-data-path list: an array of strings
//                                     (numbers allowed as weights), a whitespace-separated
//                                     string, or null for no data. All three keys are required,
//                                     as Megatron reads each; other keys are ignored, as there.
//   --per-dataset-sequences-path FILE JSON {"PREFIX": [sequence count, document count], ...},
//                                     the two counts of PREFIX.idx's header (the document
//                                     count is documents + 1). `gridfeed inspect
//                                     --per-dataset-sequences-out` writes it.
//
// Exclusions, as Megatron asserts them: --data-path or --data-args-path; the per-split flags
// or --per-split-data-args-path; --per-split-data-args-path and --split (each split has its
// own list). gridfeed also refuses a blend list and per-split lists together (Megatron
// silently reads the blend). Every error is InvalidArgument naming the flag and the file.
// Files are bounded in size (kMaxDataArgsFileBytes), lists in entries (kMaxDataArgsEntries)
// and JSON files in values (4 x kMaxDataArgsEntries, counted before parsing) before anything
// is allocated for them. Local; thread compatible.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::config {

inline constexpr int64_t kMaxDataArgsFileBytes = int64_t{1} << 26;  // 64 MiB
inline constexpr int64_t kMaxDataArgsEntries = int64_t{1} << 20;    // weights + prefixes

// The --data-args-path list: the file's whitespace-separated entries, shape checked
// (CheckDataPathList).
Result<std::vector<std::string>> ReadDataArgs(const std::string& path);

// The --per-split-data-args-path lists (train, valid, test; none for null), shape checked.
Result<std::array<std::optional<std::vector<std::string>>, 3>> ReadPerSplitDataArgs(
    const std::string& path);

// The --per-dataset-sequences-path counts: non-negative integers below 2^62.
Result<SequencesPerDataset> ReadPerDatasetSequences(const std::string& path);

// The file Megatron's build_sequences_per_dataset.py writes (Python's json.dump: entries in
// the given order, ", " and ": " separators, non-ASCII escaped), without a trailing newline.
std::string PerDatasetSequencesJson(
    const std::vector<std::pair<std::string, std::array<int64_t, 2>>>& counts);

// Megatron's list shapes, checked where Megatron would fail later or read something else:
// no entries; an odd count that starts "weight prefix" (a weight or a prefix is missing); an
// even count whose weight places hold numbers and non-numbers (a weight is not a number).
// `where` starts each message (e.g. "--data-args-path 'blend.txt'").
Status CheckDataPathList(const std::string& where, const std::vector<std::string>& entries);

// Reads the three files the options name into data_path, train/valid/test_data_path and
// sequences_per_dataset, after checking the exclusions above. OptionFlags calls it once the
// YAML file and the flags are applied; anything else that fills JobOptions and names these
// files calls it before Validate (which refuses a named file that was not read).
Status LoadDataArgFiles(JobOptions* o);

}  // namespace gridfeed::config
