#include "gridfeed/text/prep_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::text {
namespace {

using nlohmann::json;

// Prep's view of a text tokenizer: a string is one sequence, a list of strings one sequence
// per entry that encodes to something (like Megatron's preprocessing).
class TextPrepTokenizer final : public Tokenizer {
 public:
  explicit TextPrepTokenizer(std::unique_ptr<TextTokenizer> t) : t_(std::move(t)) {}

  Result<std::vector<Sequence>> Encode(const json& v) const override {
    std::vector<const std::string*> texts;
    if (v.is_string()) {
      texts.push_back(v.get_ptr<const std::string*>());
    } else if (v.is_array() &&
               std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); })) {
      for (const auto& e : v) texts.push_back(e.get_ptr<const std::string*>());
    } else {
      return InvalidArgument("value is not a string or a list of strings");
    }
    std::vector<Sequence> out;
    for (const std::string* t : texts) {
      GRIDFEED_ASSIGN_OR_RETURN(Sequence ids, t_->Encode(*t));
      if (!ids.empty()) out.push_back(std::move(ids));
    }
    return out;
  }
  int64_t vocab_size() const override { return t_->vocab_size(); }
  std::optional<int64_t> eos_id() const override { return t_->eos_id(); }

 private:
  std::unique_ptr<TextTokenizer> t_;
};

class PretokenizedTokenizer final : public Tokenizer {
 public:
  explicit PretokenizedTokenizer(int64_t vocab_size) : vocab_size_(vocab_size) {}

  Result<std::vector<Sequence>> Encode(const json& v) const override {
    if (!v.is_array()) return InvalidArgument("value is not a list of token ids");
    std::vector<Sequence> out;
    const bool nested = !v.empty() && v.front().is_array();
    if (!nested) {
      out.emplace_back();
      GRIDFEED_RETURN_IF_ERROR(Fill(v, &out.back()));
    } else {
      for (const auto& seq : v) {
        if (!seq.is_array()) return InvalidArgument("mixed list: expected a list of lists");
        out.emplace_back();
        GRIDFEED_RETURN_IF_ERROR(Fill(seq, &out.back()));
      }
    }
    // Empty sequences are dropped, as the text tokenizer drops texts that encode to nothing.
    std::erase_if(out, [](const Sequence& s) { return s.empty(); });
    return out;
  }
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int64_t> eos_id() const override { return std::nullopt; }

 private:
  Status Fill(const json& list, Sequence* out) const {
    out->reserve(list.size());
    for (const auto& e : list) {
      if (!e.is_number_integer())
        return InvalidArgument("token " + e.dump() + " is not an integer");
      const int64_t id =
          e.is_number_unsigned() && e.get<uint64_t>() > INT64_MAX ? -1 : e.get<int64_t>();
      if (id < 0 || id >= vocab_size_) {
        return InvalidArgument("token id " + e.dump() + " outside the vocabulary [0, " +
                               std::to_string(vocab_size_) + ")");
      }
      out->push_back(id);
    }
    return Status::Ok();
  }

  int64_t vocab_size_;
};

}  // namespace

std::unique_ptr<Tokenizer> MakePrepTokenizer(std::unique_ptr<TextTokenizer> text) {
  return std::make_unique<TextPrepTokenizer>(std::move(text));
}

Result<std::unique_ptr<Tokenizer>> MakeSentencePieceTokenizer(const std::string& model_path) {
  GRIDFEED_ASSIGN_OR_RETURN(auto t, LoadSentencePieceTokenizer(model_path));
  return MakePrepTokenizer(std::move(t));
}

Result<std::unique_ptr<Tokenizer>> MakeTextTokenizer(const std::string& path) {
  GRIDFEED_ASSIGN_OR_RETURN(auto t, LoadTextTokenizer(path));
  return MakePrepTokenizer(std::move(t));
}

std::unique_ptr<Tokenizer> MakePretokenizedTokenizer(int64_t vocab_size) {
  return std::make_unique<PretokenizedTokenizer>(vocab_size);
}

}  // namespace gridfeed::text
