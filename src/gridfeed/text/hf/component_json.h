// Reading a normalizer's or pre-tokenizer's fields from its JSON object the way the library's
// serde types do: a field without a serde default is required, a field of the wrong JSON type is
// an error, unknown fields are ignored. Errors are InvalidArgument naming the field and `where`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gridfeed/core/status.h"
#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/regex.h"

namespace gridfeed::text::hf {

// The value of `key`; NotFound-style InvalidArgument when missing.
Result<const nlohmann::json*> RequiredField(const nlohmann::json& j, std::string_view key,
                                            const JsonWhere& where);
Result<bool> RequiredBool(const nlohmann::json& j, std::string_view key, const JsonWhere& where);
// `fallback` when the field is absent (serde default); an error when present with another type.
Result<bool> OptionalBool(const nlohmann::json& j, std::string_view key, bool fallback,
                          const JsonWhere& where);
Result<std::string> RequiredString(const nlohmann::json& j, std::string_view key,
                                   const JsonWhere& where);
// A string field holding exactly one character (Rust `char`), returned as its UTF-8 bytes.
Result<std::string> RequiredChar(const nlohmann::json& j, std::string_view key,
                                 const JsonWhere& where);

// A Split / Replace pattern: {"Regex": string} compiled as is, or {"String": string} matched
// literally (serde's externally tagged enum).
Result<Regex> ParsePattern(const nlohmann::json& j, const JsonWhere& where);

// The "type" of a component object, for dispatch.
Result<std::string> ComponentType(const nlohmann::json& j, const JsonWhere& where);

// "unsupported <what> type \"T\" (FILE: PATH.type)".
Status UnsupportedType(std::string_view what, std::string_view type, const JsonWhere& where);

}  // namespace gridfeed::text::hf
