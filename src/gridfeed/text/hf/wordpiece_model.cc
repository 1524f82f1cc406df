// The library's WordPiece model (models/wordpiece): greedy longest-match-first. From each
// position the longest vocabulary entry that the rest of the piece starts with is taken (spelled
// with `continuing_subword_prefix` after the first), shortening one character at a time; a piece
// where some position matches nothing, or longer than `max_input_chars_per_word` characters,
// is the single `unk_token` (an error when that is not in the vocabulary, as in the library).
#include <memory>
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/models.h"
#include "gridfeed/text/hf/token_vocab.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

class WordPieceModel final : public Model {
 public:
  WordPieceModel(TokenVocab vocab, std::string unk, std::string prefix, uint64_t max_chars,
                 std::string unk_where)
      : vocab_(std::move(vocab)),
        unk_(std::move(unk)),
        prefix_(std::move(prefix)),
        max_chars_(max_chars),
        unk_where_(std::move(unk_where)) {}

  Status Tokenize(std::string_view piece, std::vector<int32_t>* ids) const override {
    if (Utf8Length(piece) > max_chars_) return PushUnk(ids);
    const size_t first = ids->size();
    std::string candidate;
    size_t start = 0;
    while (start < piece.size()) {
      size_t end = piece.size();
      std::optional<int32_t> found;
      while (start < end) {
        std::string_view sub = piece.substr(start, end - start);
        std::optional<int32_t> id;
        if (start > 0) {
          candidate.assign(prefix_).append(sub);
          id = vocab_.Find(candidate);
        } else {
          id = vocab_.Find(sub);
        }
        if (id) {
          found = id;
          break;
        }
        end -= LastCharLen(sub);
      }
      if (!found) {
        ids->resize(first);
        return PushUnk(ids);
      }
      ids->push_back(*found);
      start = end;
    }
    return Status::Ok();
  }
  std::optional<int32_t> TokenToId(std::string_view token) const override {
    return vocab_.Find(token);
  }
  std::optional<std::string_view> IdToToken(int32_t id) const override { return vocab_.Token(id); }
  int64_t vocab_size() const override { return vocab_.size(); }

 private:
  static size_t LastCharLen(std::string_view s) {
    size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    return s.size() - i;
  }
  Status PushUnk(std::vector<int32_t>* ids) const {
    auto unk = vocab_.Find(unk_);
    if (!unk) {
      return InvalidArgument("WordPiece: the unk_token \"" + unk_ +
                             "\" is needed but not in the vocabulary (" + unk_where_ + ")");
    }
    ids->push_back(*unk);
    return Status::Ok();
  }

  TokenVocab vocab_;
  std::string unk_;
  std::string prefix_;
  uint64_t max_chars_;
  std::string unk_where_;
};

}  // namespace

Result<std::unique_ptr<Model>> MakeWordPieceModel(const nlohmann::json& j, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* v, RequiredField(j, "vocab", where));
  GRIDFEED_ASSIGN_OR_RETURN(std::string unk, RequiredString(j, "unk_token", where));
  GRIDFEED_ASSIGN_OR_RETURN(std::string prefix,
                            RequiredString(j, "continuing_subword_prefix", where));
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* max,
                            RequiredField(j, "max_input_chars_per_word", where));
  if (!max->is_number_unsigned()) {
    return InvalidArgument("expected a non-negative integer at " +
                           where.Field("max_input_chars_per_word").str());
  }
  GRIDFEED_ASSIGN_OR_RETURN(TokenVocab vocab, TokenVocab::Parse(*v, where.Field("vocab")));
  return std::unique_ptr<Model>(
      std::make_unique<WordPieceModel>(std::move(vocab), std::move(unk), std::move(prefix),
                                       max->get<uint64_t>(), where.Field("unk_token").str()));
}

}  // namespace gridfeed::text::hf
