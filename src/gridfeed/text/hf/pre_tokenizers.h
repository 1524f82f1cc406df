// The pre-tokenizer kinds of the Hugging Face pipeline, one maker per "type"; MakePreTokenizer
// (pre_tokenizer_factory.cc) dispatches to them. Each maker reads the fields the library's serde
// type reads (required unless it has a serde default) and refuses values it does not implement.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "gridfeed/core/status.h"
#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {

// ByteLevel: optional " " prefix, the GPT-2 regex split (use_regex), bytes -> GPT-2 alphabet.
Result<std::unique_ptr<PreTokenizer>> MakeByteLevelPreTokenizer(const nlohmann::json& j,
                                                                const JsonWhere& where);
// Split: a {"Regex"} or {"String"} pattern, a delimiter behavior, invert.
Result<std::unique_ptr<PreTokenizer>> MakeSplitPreTokenizer(const nlohmann::json& j,
                                                            const JsonWhere& where);

// Metaspace: ' ' -> replacement, prepend_scheme (always / first / never, legacy
// add_prefix_space), split on the replacement (MergedWithNext).
Result<std::unique_ptr<PreTokenizer>> MakeMetaspacePreTokenizer(const nlohmann::json& j,
                                                                const JsonWhere& where);
// Digits, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit (by
// `type`).
Result<std::unique_ptr<PreTokenizer>> MakeCharClassPreTokenizer(const std::string& type,
                                                                const nlohmann::json& j,
                                                                const JsonWhere& where);

}  // namespace gridfeed::text::hf
