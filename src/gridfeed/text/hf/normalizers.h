// The normalizer kinds of the Hugging Face pipeline, one maker per "type"; MakeNormalizer
// (normalizer_factory.cc) dispatches to them ("Precompiled" to MakePrecompiledNormalizer,
// models.h). Each maker reads the fields the library's serde type reads and refuses values it
// does not implement.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "gridfeed/core/status.h"
#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {

// Replace: every match of a {"String"} / {"Regex"} pattern (Oniguruma, the crate's find_iter,
// empty matches included) becomes `content`.
Result<std::unique_ptr<Normalizer>> MakeReplaceNormalizer(const nlohmann::json& j,
                                                          const JsonWhere& where);

// NFC, NFD, NFKC, NFKD (ICU), Lowercase (Rust char::to_lowercase per character), Strip
// (White_Space), StripAccents (drops M* characters), Nmt, ByteLevel, BertNormalizer, by `type`.
Result<std::unique_ptr<Normalizer>> MakeCharNormalizer(const std::string& type,
                                                       const nlohmann::json& j,
                                                       const JsonWhere& where);

}  // namespace gridfeed::text::hf
