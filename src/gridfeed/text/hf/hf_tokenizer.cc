#include "gridfeed/text/hf/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "gridfeed/text/bounded_file.h"
#include "gridfeed/text/hf/added_vocabulary.h"
#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/post_processor.h"
#include "gridfeed/text/hf/tokenizer_config.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;

// Real tokenizer.json files are at most tens of megabytes; refuse before reading anything huge.
constexpr uint64_t kMaxTokenizerJsonBytes = 1ull << 30;

// Classes whose fast tokenizer rebuilds the post-processor from add_bos_token/add_eos_token, and
// their defaults.
struct BosEosRule {
  const char* cls;
  bool add_bos, add_eos;
};
constexpr BosEosRule kBosEosClasses[] = {{"LlamaTokenizer", true, false},
                                         {"CodeLlamaTokenizer", true, false},
                                         {"GemmaTokenizer", true, false},
                                         {"GPTNeoXTokenizer", false, false}};

// "LlamaTokenizerFast" and "LlamaTokenizer" name the same fast class.
std::string BaseClass(const std::optional<std::string>& c) {
  if (!c) return "";
  std::string s = *c;
  if (s.ends_with("Fast")) s.resize(s.size() - 4);
  return s;
}

class HuggingFaceTokenizer final : public TextTokenizer {
 public:
  std::string_view kind() const override { return "huggingface"; }

  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    GRIDFEED_RETURN_IF_ERROR(CheckUtf8(text));
    std::vector<int32_t> ids;
    GRIDFEED_RETURN_IF_ERROR(EncodeIds(text, /*add_special_tokens=*/true, &ids));
    return std::vector<int64_t>(ids.begin(), ids.end());
  }

  Result<std::string> Decode(std::span<const int64_t> ids) const override {
    return DecodeIds(ids, /*remove_special=*/true);
  }

  std::optional<int64_t> TokenId(std::string_view token) const override {
    if (auto id = added_.TokenToId(token)) return *id;
    if (auto id = model_->TokenToId(token)) return *id;
    return std::nullopt;
  }

  Status EncodeIds(std::string_view text, bool add_special_tokens,
                   std::vector<int32_t>* ids) const {
    GRIDFEED_RETURN_IF_ERROR(
        EncodeWithPipeline(text, added_, normalizer_.get(), pre_tokenizer_.get(), *model_, ids));
    if (add_special_tokens && post_processor_) post_processor_->Process(ids);
    return Status::Ok();
  }

  Result<std::string> DecodeIds(std::span<const int64_t> ids, bool remove_special) const {
    GRIDFEED_ASSIGN_OR_RETURN(
        std::vector<std::string> tokens,
        IdsToTokens(ids, added_, *model_, remove_special ? &special_strings_ : nullptr, path_));
    return DecodeTokens(decoder_.get(), std::move(tokens));
  }

  Status Load(const std::string& folder, const std::string& file,
              const TextTokenizerOptions& options);

 private:
  Status LoadPipeline(const std::string& file, const TokenizerConfig& cfg);
  std::optional<int32_t> Id(std::string_view token) const {
    auto id = TokenId(token);
    return id ? std::optional<int32_t>(static_cast<int32_t>(*id)) : std::nullopt;
  }

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocabulary added_;
  std::set<std::string, std::less<>> special_strings_;  // all_special_tokens
};

Status HuggingFaceTokenizer::LoadPipeline(const std::string& file, const TokenizerConfig& cfg) {
  GRIDFEED_ASSIGN_OR_RETURN(
      std::string text,
      ReadFileBounded(file, kMaxTokenizerJsonBytes,
                      "cannot read tokenizer '" + file + "': ", [&](uint64_t size) {
                        return file + ": " + std::to_string(size) + " bytes, more than the " +
                               std::to_string(kMaxTokenizerJsonBytes) +
                               " a tokenizer.json may have";
                      }));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  text.clear();
  text.shrink_to_fit();
  if (j.is_discarded()) return InvalidArgument(file + ": not valid JSON (truncated or malformed)");
  if (!j.is_object()) return InvalidArgument(file + ": not a JSON object");
  const JsonWhere root{file, ""};
  if (auto v = j.find("version"); v != j.end() && !(v->is_string() && *v == "1.0")) {
    return InvalidArgument(root.Field("version").str() + ": unknown tokenizer version " +
                           v->dump() + " (1.0 is known)");
  }
  auto m = j.find("model");
  if (m == j.end() || m->is_null()) return InvalidArgument(root.str() + ": no 'model'");
  GRIDFEED_ASSIGN_OR_RETURN(model_, MakeModel(*m, root.Field("model")));
  if (auto n = j.find("normalizer"); n != j.end() && !n->is_null()) {
    GRIDFEED_ASSIGN_OR_RETURN(normalizer_, MakeNormalizer(*n, root.Field("normalizer")));
  }
  if (auto p = j.find("pre_tokenizer"); p != j.end() && !p->is_null()) {
    json pre = *p;
    // GPT2TokenizerFast and GPTNeoXTokenizerFast rebuild a pre-tokenizer whose add_prefix_space
    // differs from theirs (default false).
    const std::string cls = BaseClass(cfg.tokenizer_class);
    if ((cls == "GPT2Tokenizer" || cls == "GPTNeoXTokenizer") && pre.is_object() &&
        pre.contains("add_prefix_space")) {
      pre["add_prefix_space"] = cfg.add_prefix_space.value_or(false);
    }
    GRIDFEED_ASSIGN_OR_RETURN(pre_tokenizer_, MakePreTokenizer(pre, root.Field("pre_tokenizer")));
  }
  if (auto p = j.find("post_processor"); p != j.end() && !p->is_null()) {
    GRIDFEED_ASSIGN_OR_RETURN(post_processor_, MakePostProcessor(*p, root.Field("post_processor")));
  }
  if (auto d = j.find("decoder"); d != j.end() && !d->is_null()) {
    GRIDFEED_ASSIGN_OR_RETURN(decoder_, MakeDecoder(*d, root.Field("decoder")));
  }
  if (auto a = j.find("added_tokens"); a != j.end() && !a->is_null()) {
    const JsonWhere aw = root.Field("added_tokens");
    if (!a->is_array()) return InvalidArgument(aw.str() + ": not a list");
    std::vector<AddedToken> tokens;
    std::vector<int64_t> ids;
    for (size_t i = 0; i < a->size(); ++i) {
      const json& e = (*a)[i];
      const JsonWhere w = aw.Index(i);
      if (!e.is_object()) return InvalidArgument(w.str() + ": not an object");
      auto id = e.find("id");
      auto content = e.find("content");
      if (id == e.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
          id->get<int64_t>() > INT32_MAX) {
        return InvalidArgument(w.Field("id").str() + ": missing or not a token id");
      }
      if (content == e.end() || !content->is_string()) {
        return InvalidArgument(w.Field("content").str() + ": missing or not a string");
      }
      AddedToken t;
      t.content = content->get<std::string>();
      for (auto [key, field] : {std::pair{"single_word", &t.single_word},
                                {"lstrip", &t.lstrip},
                                {"rstrip", &t.rstrip},
                                {"normalized", &t.normalized},
                                {"special", &t.special}}) {
        auto f = e.find(key);
        if (f == e.end() || !f->is_boolean()) {
          return InvalidArgument(w.Field(key).str() + ": missing or not a boolean");
        }
        *field = f->get<bool>();
      }
      tokens.push_back(std::move(t));
      ids.push_back(id->get<int64_t>());
    }
    GRIDFEED_RETURN_IF_ERROR(added_.Add(tokens, ids, *model_, normalizer_.get(), aw));
  }
  return Status::Ok();
}

Status HuggingFaceTokenizer::Load(const std::string& folder, const std::string& file,
                                  const TextTokenizerOptions& options) {
  path_ = file;
  GRIDFEED_ASSIGN_OR_RETURN(TokenizerConfig cfg, ReadTokenizerConfig(folder));
  GRIDFEED_RETURN_IF_ERROR(LoadPipeline(file, cfg));
  const JsonWhere cfg_where{(std::filesystem::path(folder) / "tokenizer_config.json").string(),
                            "added_tokens_decoder"};

  // transformers' PreTrainedTokenizerFast.__init__: the config's added tokens that tokenizer.json
  // lacks (or has with other flags), then the special tokens not added yet.
  std::set<std::string> special_names;
  for (const auto& [key, v] : cfg.specials) special_names.insert(v.token.content);
  for (const auto& v : cfg.additional_special_tokens) special_names.insert(v.token.content);
  std::vector<AddedToken> to_add;
  for (const auto& [id, t] : cfg.added_tokens_decoder) {
    auto have = added_.TokenToId(t.content);
    const AddedToken* cur = have ? added_.TokenById(*have) : nullptr;
    if (cur == nullptr || !(*cur == t)) to_add.push_back(t);
  }
  const auto listed = [&](const std::string& content) {
    if (added_.TokenToId(content)) return true;
    return std::any_of(to_add.begin(), to_add.end(),
                       [&](const AddedToken& t) { return t.content == content; });
  };
  std::vector<const SpecialTokenValue*> extended;  // all_special_tokens_extended
  {
    std::set<std::string> seen;
    for (const char* key : kSpecialTokenKeys) {
      auto it = cfg.specials.find(key);
      if (it != cfg.specials.end() && seen.insert(it->second.token.content).second) {
        extended.push_back(&it->second);
      }
    }
    for (const auto& v : cfg.additional_special_tokens) {
      if (seen.insert(v.token.content).second) extended.push_back(&v);
    }
  }
  for (const SpecialTokenValue* v : extended) {
    if (!listed(v->token.content)) to_add.push_back(v->token);
  }
  for (AddedToken& t : to_add) t.special = t.special || special_names.contains(t.content);
  if (!to_add.empty()) {
    GRIDFEED_RETURN_IF_ERROR(added_.Add(to_add, {}, *model_, normalizer_.get(), cfg_where));
  }

  const auto special = [&](const char* key) -> std::optional<std::string> {
    auto it = cfg.specials.find(key);
    if (it == cfg.specials.end()) return std::nullopt;
    return it->second.token.content;
  };
  // LlamaTokenizerFast & co.: update_post_processor().
  const std::string cls = BaseClass(cfg.tokenizer_class);
  for (const BosEosRule& r : kBosEosClasses) {
    if (cls != r.cls) continue;
    if (cfg.add_prefix_space && cls != "GPTNeoXTokenizer") {
      return InvalidArgument(cfg_where.file + ": add_prefix_space makes transformers convert " +
                             cls +
                             " from its slow (SentencePiece) tokenizer, which gridfeed refuses");
    }
    const bool add_bos = cfg.add_bos_token.value_or(r.add_bos);
    const bool add_eos = cfg.add_eos_token.value_or(r.add_eos);
    std::optional<int32_t> bos, eos;
    if (add_bos) {
      auto b = special("bos_token");
      if (!b)
        return InvalidArgument(cfg_where.file + ": add_bos_token is true but bos_token is none");
      bos = Id(*b);
      if (!bos) bos = special("unk_token") ? Id(*special("unk_token")) : std::nullopt;
      if (!bos) return InvalidArgument(cfg_where.file + ": bos_token '" + *b + "' has no id");
    }
    if (add_eos) {
      auto e = special("eos_token");
      if (!e)
        return InvalidArgument(cfg_where.file + ": add_eos_token is true but eos_token is none");
      eos = Id(*e);
      if (!eos) eos = special("unk_token") ? Id(*special("unk_token")) : std::nullopt;
      if (!eos) return InvalidArgument(cfg_where.file + ": eos_token '" + *e + "' has no id");
    }
    post_processor_ = MakeBosEosProcessor(bos, eos);
  }

  // Megatron's HuggingFaceTokenizer.__init__ -> transformers' add_special_tokens.
  const JsonWhere megatron{file, "(Megatron's add_special_tokens)"};
  std::vector<AddedToken> megatron_add;
  const auto plain_special = [](const std::string& content) {
    AddedToken t;
    t.content = content;
    t.normalized = false;
    t.special = true;
    return t;
  };
  if (!special("sep_token") && special("eos_token")) {
    cfg.specials["sep_token"] = {plain_special(*special("eos_token")), true};
    megatron_add.push_back(plain_special(*special("eos_token")));
  }
  // And the other way round (BERT has no eos_token: [SEP] becomes its EOS, hence its EOD).
  if (!special("eos_token") && special("sep_token")) {
    cfg.specials["eos_token"] = {plain_special(*special("sep_token")), true};
    megatron_add.push_back(plain_special(*special("sep_token")));
  }
  if (!special("bos_token") && special("cls_token")) {
    cfg.specials["bos_token"] = {plain_special(*special("cls_token")), true};
    megatron_add.push_back(plain_special(*special("cls_token")));
  }
  if (!special("cls_token") && special("bos_token")) {
    cfg.specials["cls_token"] = {plain_special(*special("bos_token")), true};
    if (std::find(megatron_add.begin(), megatron_add.end(), plain_special(*special("bos_token"))) ==
        megatron_add.end()) {
      megatron_add.push_back(plain_special(*special("bos_token")));
    }
  }
  if (!options.special_tokens.empty()) {
    cfg.additional_special_tokens.clear();
    for (const auto& s : options.special_tokens) {
      cfg.additional_special_tokens.push_back({plain_special(s), true});
      megatron_add.push_back(plain_special(s));
    }
  }
  if (!megatron_add.empty()) {
    GRIDFEED_RETURN_IF_ERROR(added_.Add(megatron_add, {}, *model_, normalizer_.get(), megatron));
  }

  // len(tokenizer): the model's vocabulary plus the added tokens it lacks.
  vocab_size_ = model_->vocab_size();
  for (const auto& [content, id] : added_.vocab()) {
    if (!model_->TokenToId(content)) ++vocab_size_;
  }
  // Ids of the special tokens: convert_tokens_to_ids, unk's id for an unknown string.
  const auto unk_id = special("unk_token") ? Id(*special("unk_token")) : std::nullopt;
  const auto id_of = [&](const std::optional<std::string>& s) -> std::optional<int64_t> {
    if (!s) return std::nullopt;
    if (auto id = Id(*s)) return *id;
    if (unk_id) return *unk_id;
    return std::nullopt;
  };
  bos_ = id_of(special("bos_token"));
  eos_ = id_of(special("eos_token"));
  pad_ = id_of(special("pad_token"));
  unk_ = unk_id;
  // all_special_tokens: bos, eos, unk, sep, pad, cls, mask, then the additional ones, each once.
  std::set<std::string> seen;
  const auto push = [&](const std::string& s) {
    if (!seen.insert(s).second) return;
    special_strings_.insert(s);
    if (auto id = id_of(s)) special_.push_back({s, *id});
  };
  for (const char* key : kSpecialTokenKeys) {
    if (auto s = special(key)) push(*s);
  }
  for (const auto& v : cfg.additional_special_tokens) push(v.token.content);
  IndexSpecials();
  chat_template_ = cfg.chat_template;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<TextTokenizer>> LoadHuggingFaceTokenizer(
    const std::string& path, const TextTokenizerOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string folder = path, file;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "tokenizer.json").string();
  } else {
    file = path;
    folder = fs::path(path).parent_path().string();
    if (folder.empty()) folder = ".";
  }
  if (!fs::exists(file, ec)) return NotFound("no tokenizer.json at '" + path + "'");
  auto t = std::make_unique<HuggingFaceTokenizer>();
  GRIDFEED_RETURN_IF_ERROR(t->Load(folder, file, options));
  return std::unique_ptr<TextTokenizer>(std::move(t));
}

Status EncodeWithPipeline(std::string_view text, const AddedVocabulary& added,
                          const Normalizer* normalizer, const PreTokenizer* pre_tokenizer,
                          const Model& model, std::vector<int32_t>* ids) {
  std::vector<AddedSplit> splits;
  GRIDFEED_RETURN_IF_ERROR(added.ExtractAndNormalize(text, normalizer, &splits));
  std::vector<Piece> pieces;
  for (AddedSplit& s : splits) {
    if (s.id) {
      ids->push_back(*s.id);
      continue;
    }
    if (!pre_tokenizer) {
      GRIDFEED_RETURN_IF_ERROR(model.Tokenize(s.text, ids));
      continue;
    }
    pieces.clear();
    pieces.push_back(Piece{std::move(s.text), s.at_origin});
    GRIDFEED_RETURN_IF_ERROR(pre_tokenizer->PreTokenize(&pieces));
    for (const Piece& p : pieces) GRIDFEED_RETURN_IF_ERROR(model.Tokenize(p.text, ids));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> IdsToTokens(std::span<const int64_t> ids,
                                             const AddedVocabulary& added, const Model& model,
                                             const std::set<std::string, std::less<>>* drop,
                                             const std::string& path) {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    std::optional<std::string_view> t;
    if (id >= 0 && id <= INT32_MAX) {
      t = added.IdToToken(static_cast<int32_t>(id));
      if (!t) t = model.IdToToken(static_cast<int32_t>(id));
    }
    if (!t) {
      return InvalidArgument("token id " + std::to_string(id) + " at position " +
                             std::to_string(i) + " is not a token of " + path);
    }
    if (drop && drop->contains(*t)) continue;
    tokens.emplace_back(*t);
  }
  return tokens;
}

Result<std::string> DecodeTokens(const Decoder* decoder, std::vector<std::string> tokens) {
  std::string out;
  if (!decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto parts, decoder->DecodeChain(std::move(tokens)));
  for (const auto& p : parts) out += p;
  return out;
}

Result<std::string> DecodeKeepingSpecials(const TextTokenizer& tokenizer,
                                          std::span<const int64_t> ids) {
  const auto* hf = dynamic_cast<const HuggingFaceTokenizer*>(&tokenizer);
  if (hf == nullptr) {
    return InvalidArgument("DecodeKeepingSpecials needs a Hugging Face tokenizer, not '" +
                           std::string(tokenizer.kind()) + "'");
  }
  return hf->DecodeIds(ids, /*remove_special=*/false);
}

}  // namespace gridfeed::text::hf
