// A Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json +
// special_tokens_map.json) as Megatron's HuggingFaceTokenizer sees it through transformers 4.x
// PreTrainedTokenizerFast: a TextTokenizer of kind "huggingface".
//
//   * Pipeline (tokenizer.json, the `tokenizers` library): added tokens on the raw text ->
//     normalizer -> normalized added tokens -> pre-tokenizer -> model -> post-processor.
//   * Load (transformers): tokens of the config's added_tokens_decoder that differ from
//     tokenizer.json's, and special tokens not yet added, are added (a plain-string special token
//     as special, normalized false); for LlamaTokenizer, CodeLlamaTokenizer, GemmaTokenizer and
//     GPTNeoXTokenizer the post-processor becomes `[bos] $A [eos]` from add_bos_token /
//     add_eos_token; for GPT2Tokenizer/GPTNeoXTokenizer a ByteLevel pre-tokenizer takes the
//     config's add_prefix_space. Then Megatron re-adds eos (as sep, if there is no sep token), bos
//     (as cls, if there is no cls token) and TextTokenizerOptions::special_tokens (which replace
//     the additional special tokens) through add_special_tokens: special, normalized false, no
//     strip; a string the tokenizer lacks gets the next id.
//   * Encode = `tokenizer(text).input_ids`; vocab_size() = len(tokenizer) (the model's
//     vocabulary plus the added tokens it lacks); TokenId = token_to_id (added tokens first).
//   * Decode = Megatron's ids_to_text(remove_special_tokens=True): ids -> token strings, those in
//     all_special_tokens dropped, the decoder's chain joined (" ".join without a decoder); no
//     clean-up; bytes that are not UTF-8 become U+FFFD (inside the decoders, as the library's
//     from_utf8_lossy).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::text::hf {

// `path` is the folder or its tokenizer.json.
Result<std::unique_ptr<TextTokenizer>> LoadHuggingFaceTokenizer(
    const std::string& path, const TextTokenizerOptions& options = {});

// Megatron's ids_to_text(ids, remove_special_tokens=false) on a tokenizer made by
// LoadHuggingFaceTokenizer (InvalidArgument for any other kind).
Result<std::string> DecodeKeepingSpecials(const TextTokenizer& tokenizer,
                                          std::span<const int64_t> ids);

// The pipeline's steps, shared by the Hugging Face tokenizer and the GPT-2 BPE tokenizer (which
// assembles the same components from vocab.json and merges.txt).
class AddedVocabulary;
class Normalizer;
class PreTokenizer;
class Model;
class Decoder;

// Appends the ids of `text` (valid UTF-8): added tokens are split off (normalized ones on the
// `normalizer`'s output; it may be null), each remaining split is pre-tokenized (when
// `pre_tokenizer` is not null) and its pieces tokenized by `model`. No post-processor.
Status EncodeWithPipeline(std::string_view text, const AddedVocabulary& added,
                          const Normalizer* normalizer, const PreTokenizer* pre_tokenizer,
                          const Model& model, std::vector<int32_t>* ids);

// The token strings of `ids` (the added vocabulary's first, then the model's), leaving out those
// in `drop` when it is not null. InvalidArgument naming an id that is neither, its position and
// `path`.
Result<std::vector<std::string>> IdsToTokens(std::span<const int64_t> ids,
                                             const AddedVocabulary& added, const Model& model,
                                             const std::set<std::string, std::less<>>* drop,
                                             const std::string& path);

// The decoder's chain over `tokens`, joined; without a decoder (null), " ".join(tokens).
Result<std::string> DecodeTokens(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace gridfeed::text::hf
