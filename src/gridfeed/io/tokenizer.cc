#include "gridfeed/io/tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace gridfeed::io {
namespace {

using nlohmann::json;

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : sp_(std::move(sp)) {}

  Result<std::vector<Sequence>> Encode(const json& v) const override {
    std::vector<std::string> texts;
    if (v.is_string()) {
      texts.push_back(v.get<std::string>());
    } else if (v.is_array() &&
               std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); })) {
      for (const auto& e : v) texts.push_back(e.get<std::string>());
    } else {
      return InvalidArgument("value is not a string or a list of strings");
    }
    std::vector<Sequence> out;
    std::vector<int> ids;
    for (const auto& t : texts) {
      ids.clear();
      auto st = sp_->Encode(t, &ids);
      if (!st.ok()) return InvalidArgument("sentencepiece: " + st.ToString());
      if (ids.empty()) continue;
      out.emplace_back(ids.begin(), ids.end());
    }
    return out;
  }
  int64_t vocab_size() const override { return sp_->GetPieceSize(); }
  std::optional<int64_t> eos_id() const override {
    int id = sp_->eos_id();
    if (id < 0) return std::nullopt;
    return id;
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
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

Result<std::unique_ptr<Tokenizer>> MakeSentencePieceTokenizer(const std::string& model_path) {
  if (!std::filesystem::exists(model_path)) {
    return NotFound("no such tokenizer model: '" + model_path + "'");
  }
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = sp->Load(model_path);
  if (!st.ok()) {
    return InvalidArgument("cannot load SentencePiece model '" + model_path +
                           "': " + st.ToString());
  }
  return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(sp)));
}

std::unique_ptr<Tokenizer> MakePretokenizedTokenizer(int64_t vocab_size) {
  return std::make_unique<PretokenizedTokenizer>(vocab_size);
}

}  // namespace gridfeed::io
