// Model and normalizer factories of the Hugging Face pipeline, one per kind, each in its own
// file; MakeModel (model_factory.cc) and MakeNormalizer dispatch on "type" to them.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "gridfeed/core/status.h"
#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {

Result<std::unique_ptr<Model>> MakeBpeModel(const nlohmann::json& j, const JsonWhere& where);
Result<std::unique_ptr<Model>> MakeUnigramModel(const nlohmann::json& j, const JsonWhere& where);
Result<std::unique_ptr<Model>> MakeWordPieceModel(const nlohmann::json& j, const JsonWhere& where);
Result<std::unique_ptr<Model>> MakeWordLevelModel(const nlohmann::json& j, const JsonWhere& where);
// SentencePiece's compiled normalization rules ("Precompiled": the base64 `precompiled_charsmap`).
Result<std::unique_ptr<Normalizer>> MakePrecompiledNormalizer(const nlohmann::json& j,
                                                              const JsonWhere& where);

}  // namespace gridfeed::text::hf
