// The library's WordLevel model (models/wordlevel): a piece is one vocabulary entry, else
// `unk_token` (an error when that is not in the vocabulary either, as in the library).
#include <memory>
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/models.h"
#include "gridfeed/text/hf/token_vocab.h"

namespace gridfeed::text::hf {
namespace {

class WordLevelModel final : public Model {
 public:
  WordLevelModel(TokenVocab vocab, std::string unk, std::string unk_where)
      : vocab_(std::move(vocab)), unk_(std::move(unk)), unk_where_(std::move(unk_where)) {}

  Status Tokenize(std::string_view piece, std::vector<int32_t>* ids) const override {
    if (auto id = vocab_.Find(piece)) {
      ids->push_back(*id);
    } else if (auto unk = vocab_.Find(unk_)) {
      ids->push_back(*unk);
    } else {
      return InvalidArgument("WordLevel: \"" + std::string(piece) +
                             "\" is not in the vocabulary and neither is the unk_token \"" + unk_ +
                             "\" (" + unk_where_ + ")");
    }
    return Status::Ok();
  }
  std::optional<int32_t> TokenToId(std::string_view token) const override {
    return vocab_.Find(token);
  }
  std::optional<std::string_view> IdToToken(int32_t id) const override { return vocab_.Token(id); }
  int64_t vocab_size() const override { return vocab_.size(); }

 private:
  TokenVocab vocab_;
  std::string unk_;
  std::string unk_where_;
};

}  // namespace

Result<std::unique_ptr<Model>> MakeWordLevelModel(const nlohmann::json& j, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* v, RequiredField(j, "vocab", where));
  GRIDFEED_ASSIGN_OR_RETURN(std::string unk, RequiredString(j, "unk_token", where));
  GRIDFEED_ASSIGN_OR_RETURN(TokenVocab vocab, TokenVocab::Parse(*v, where.Field("vocab")));
  return std::unique_ptr<Model>(std::make_unique<WordLevelModel>(std::move(vocab), std::move(unk),
                                                                 where.Field("unk_token").str()));
}

}  // namespace gridfeed::text::hf
