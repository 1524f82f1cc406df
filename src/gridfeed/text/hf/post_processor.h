// tokenizer.json's "post_processor" as the library applies it to one encoded text (the ids of a
// single sequence, `add_special_tokens` true): TemplateProcessing (its "single" template; "pair"
// is parsed and checked, never used), BertProcessing and RobertaProcessing ([cls] $A [sep]),
// ByteLevel (changes offsets only, so no ids) and Sequence (each in turn). Any other type is
// refused by name.
//
// Thread safety: immutable once built.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites the ids of one sequence.
  virtual void Process(std::vector<int32_t>* ids) const = 0;
};

Result<std::unique_ptr<PostProcessor>> MakePostProcessor(const nlohmann::json& j,
                                                         const JsonWhere& where);

// `[bos] $A [eos]` with each part only where given: what transformers' update_post_processor
// builds for the Llama/CodeLlama/Gemma fast tokenizers from add_bos_token/add_eos_token.
std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos,
                                                   std::optional<int32_t> eos);

}  // namespace gridfeed::text::hf
