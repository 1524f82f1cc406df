// tokenizer_config.json (and special_tokens_map.json beside it) as transformers 4.x reads them
// for a PreTrainedTokenizerFast: the special tokens, the class, add_bos_token/add_eos_token,
// add_prefix_space, the chat template and `added_tokens_decoder`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/text/hf/added_vocabulary.h"

namespace gridfeed::text::hf {

// transformers' SPECIAL_TOKENS_ATTRIBUTES less the additional list, in its order.
inline constexpr const char* kSpecialTokenKeys[] = {
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};

struct SpecialTokenValue {
  AddedToken token;
  bool is_string = false;  // given as a plain string (else as an AddedToken object)
};

struct TokenizerConfig {
  std::optional<std::string> tokenizer_class;
  std::map<std::string, SpecialTokenValue> specials;  // key: one of kSpecialTokenKeys
  std::vector<SpecialTokenValue> additional_special_tokens;
  std::optional<bool> add_bos_token, add_eos_token, add_prefix_space;
  std::optional<std::string> chat_template;                          // the default one
  std::vector<std::pair<int64_t, AddedToken>> added_tokens_decoder;  // ascending ids
};

// Reads `folder`/tokenizer_config.json and `folder`/special_tokens_map.json (whose entries win,
// its objects made special and its additional tokens joining the config's, as in transformers'
// from_pretrained), each if present, and `folder`/chat_template.jinja (which
// wins over the config's chat_template). An absent file is no error.
Result<TokenizerConfig> ReadTokenizerConfig(const std::string& folder);

}  // namespace gridfeed::text::hf
