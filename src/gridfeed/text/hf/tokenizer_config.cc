#include "gridfeed/text/hf/tokenizer_config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gridfeed/io/file_util.h"
#include "gridfeed/text/bounded_file.h"
#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;

// A tokenizer_config.json holds a few templates and flags; bound before reading.
constexpr uint64_t kMaxConfigBytes = 64ull << 20;

Result<std::optional<json>> ReadJsonIfPresent(const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::optional<json>();
  GRIDFEED_ASSIGN_OR_RETURN(
      std::string text,
      ReadFileBounded(file, kMaxConfigBytes, "cannot read '" + file + "': ", [&](uint64_t size) {
        return file + ": " + std::to_string(size) + " bytes, more than " +
               std::to_string(kMaxConfigBytes) + " (not a tokenizer config)";
      }));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(file + ": not valid JSON");
  if (!j.is_object()) return InvalidArgument(file + ": not a JSON object");
  return std::optional<json>(std::move(j));
}

Result<bool> Flag(const json& o, const char* key, bool def, const JsonWhere& w) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return def;
  if (!it->is_boolean()) return InvalidArgument(w.Field(key).str() + ": not a boolean");
  return it->get<bool>();
}

// An AddedToken object as Python's AddedToken(**dict) makes it: normalized defaults to
// !special.
Result<AddedToken> TokenObject(const json& o, const JsonWhere& w) {
  AddedToken t;
  auto c = o.find("content");
  if (c == o.end() || !c->is_string()) {
    return InvalidArgument(w.Field("content").str() + ": missing or not a string");
  }
  t.content = c->get<std::string>();
  GRIDFEED_ASSIGN_OR_RETURN(t.special, Flag(o, "special", false, w));
  GRIDFEED_ASSIGN_OR_RETURN(t.single_word, Flag(o, "single_word", false, w));
  GRIDFEED_ASSIGN_OR_RETURN(t.lstrip, Flag(o, "lstrip", false, w));
  GRIDFEED_ASSIGN_OR_RETURN(t.rstrip, Flag(o, "rstrip", false, w));
  GRIDFEED_ASSIGN_OR_RETURN(t.normalized, Flag(o, "normalized", !t.special, w));
  return t;
}

// A special token value: "<s>" or {"content": "<s>", ...}; null is absent. special_tokens_map.json
// makes an object special (AddedToken(**value, special=True)).
Result<std::optional<SpecialTokenValue>> SpecialValue(const json& v, const JsonWhere& w,
                                                      bool force_special) {
  if (v.is_null()) return std::optional<SpecialTokenValue>();
  SpecialTokenValue s;
  if (v.is_string()) {
    s.is_string = true;
    s.token.content = v.get<std::string>();
    s.token.special = true;
    s.token.normalized = false;
  } else if (v.is_object()) {
    json o = v;
    if (force_special) o["special"] = true;
    GRIDFEED_ASSIGN_OR_RETURN(s.token, TokenObject(o, w));
  } else {
    return InvalidArgument(w.str() + ": a special token is a string or {\"content\": ...}");
  }
  return std::optional<SpecialTokenValue>(std::move(s));
}

// `from_map`: special_tokens_map.json, whose additional tokens join the config's (each once)
// instead of replacing them.
Status ApplySpecials(const json& j, const JsonWhere& w, bool from_map, TokenizerConfig* c) {
  for (const char* key : kSpecialTokenKeys) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    GRIDFEED_ASSIGN_OR_RETURN(auto v, SpecialValue(*it, w.Field(key), from_map));
    if (v) {
      c->specials[key] = std::move(*v);
    } else {
      c->specials.erase(key);
    }
  }
  if (auto it = j.find("additional_special_tokens"); it != j.end() && !it->is_null()) {
    const JsonWhere aw = w.Field("additional_special_tokens");
    if (!it->is_array()) return InvalidArgument(aw.str() + ": not a list");
    if (!from_map) c->additional_special_tokens.clear();
    for (size_t i = 0; i < it->size(); ++i) {
      GRIDFEED_ASSIGN_OR_RETURN(auto v, SpecialValue((*it)[i], aw.Index(i), from_map));
      if (!v) continue;
      const bool known = std::any_of(
          c->additional_special_tokens.begin(), c->additional_special_tokens.end(),
          [&](const SpecialTokenValue& e) { return e.token.content == v->token.content; });
      if (!from_map || !known) c->additional_special_tokens.push_back(std::move(*v));
    }
  }
  return Status::Ok();
}

// The special tokens a transformers 4.x tokenizer class takes by default (its __init__'s keyword
// defaults) where tokenizer_config.json leaves the key out (an explicit null stays none).
struct ClassDefaults {
  const char* cls;
  const char* unk;
  const char* bos;
  const char* eos;
  const char* sep;
  const char* pad;
  const char* cls_token;
  const char* mask;
};
constexpr ClassDefaults kClassDefaults[] = {
    {"BertTokenizer", "[UNK]", nullptr, nullptr, "[SEP]", "[PAD]", "[CLS]", "[MASK]"},
    {"DistilBertTokenizer", "[UNK]", nullptr, nullptr, "[SEP]", "[PAD]", "[CLS]", "[MASK]"},
    {"GPT2Tokenizer", "<|endoftext|>", "<|endoftext|>", "<|endoftext|>", nullptr, nullptr, nullptr,
     nullptr},
    {"GPTNeoXTokenizer", "<|endoftext|>", "<|endoftext|>", "<|endoftext|>", nullptr, nullptr,
     nullptr, nullptr},
    {"LlamaTokenizer", "<unk>", "<s>", "</s>", nullptr, nullptr, nullptr, nullptr},
    {"CodeLlamaTokenizer", "<unk>", "<s>", "</s>", nullptr, nullptr, nullptr, nullptr},
    {"GemmaTokenizer", "<unk>", "<bos>", "<eos>", nullptr, "<pad>", nullptr, nullptr},
    {"T5Tokenizer", "<unk>", nullptr, "</s>", nullptr, "<pad>", nullptr, nullptr},
    {"Qwen2Tokenizer", "<|endoftext|>", nullptr, "<|endoftext|>", nullptr, "<|endoftext|>", nullptr,
     nullptr},
    {"RobertaTokenizer", "<unk>", "<s>", "</s>", "</s>", "<pad>", "<s>", "<mask>"},
};

Status ApplyClassDefaults(const json& j, const JsonWhere& w, TokenizerConfig* c) {
  if (!c->tokenizer_class) return Status::Ok();
  std::string cls = *c->tokenizer_class;
  if (cls.ends_with("Fast")) cls.resize(cls.size() - 4);
  for (const ClassDefaults& d : kClassDefaults) {
    if (cls != d.cls) continue;
    const std::pair<const char*, const char*> keys[] = {
        {"unk_token", d.unk},  {"bos_token", d.bos}, {"eos_token", d.eos},
        {"sep_token", d.sep},  {"pad_token", d.pad}, {"cls_token", d.cls_token},
        {"mask_token", d.mask}};
    for (const auto& [key, value] : keys) {
      if (value == nullptr || j.contains(key)) continue;
      GRIDFEED_ASSIGN_OR_RETURN(auto v, SpecialValue(json(value), w.Field(key), false));
      if (v) c->specials[key] = std::move(*v);
    }
  }
  return Status::Ok();
}

Result<std::optional<bool>> OptFlag(const json& j, const char* key, const JsonWhere& w) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return InvalidArgument(w.Field(key).str() + ": not a boolean");
  return std::optional<bool>(it->get<bool>());
}

}  // namespace

Result<TokenizerConfig> ReadTokenizerConfig(const std::string& folder) {
  namespace fs = std::filesystem;
  TokenizerConfig c;
  const std::string cfg_file = (fs::path(folder) / "tokenizer_config.json").string();
  GRIDFEED_ASSIGN_OR_RETURN(auto cfg, ReadJsonIfPresent(cfg_file));
  if (cfg) {
    const json& j = *cfg;
    const JsonWhere w{cfg_file, ""};
    if (auto it = j.find("tokenizer_class"); it != j.end() && !it->is_null()) {
      if (!it->is_string())
        return InvalidArgument(w.Field("tokenizer_class").str() + ": not a string");
      c.tokenizer_class = it->get<std::string>();
    }
    GRIDFEED_RETURN_IF_ERROR(ApplySpecials(j, w, /*from_map=*/false, &c));
    GRIDFEED_RETURN_IF_ERROR(ApplyClassDefaults(j, w, &c));
    GRIDFEED_ASSIGN_OR_RETURN(c.add_bos_token, OptFlag(j, "add_bos_token", w));
    GRIDFEED_ASSIGN_OR_RETURN(c.add_eos_token, OptFlag(j, "add_eos_token", w));
    GRIDFEED_ASSIGN_OR_RETURN(c.add_prefix_space, OptFlag(j, "add_prefix_space", w));
    if (auto it = j.find("chat_template"); it != j.end() && !it->is_null()) {
      const JsonWhere tw = w.Field("chat_template");
      if (it->is_string()) {
        c.chat_template = it->get<std::string>();
      } else if (it->is_array()) {
        // A list of {name, template}: transformers uses the one named "default".
        for (size_t i = 0; i < it->size(); ++i) {
          const json& e = (*it)[i];
          auto n = e.is_object() ? e.find("name") : e.end();
          auto t = e.is_object() ? e.find("template") : e.end();
          if (!e.is_object() || n == e.end() || t == e.end() || !n->is_string() ||
              !t->is_string()) {
            return InvalidArgument(tw.Index(i).str() + ": expected {\"name\", \"template\"}");
          }
          if (n->get<std::string>() == "default") c.chat_template = t->get<std::string>();
        }
      } else {
        return InvalidArgument(tw.str() + ": a string or a list of {name, template}");
      }
    }
    if (auto it = j.find("added_tokens_decoder"); it != j.end() && !it->is_null()) {
      const JsonWhere aw = w.Field("added_tokens_decoder");
      if (!it->is_object()) return InvalidArgument(aw.str() + ": not an object");
      for (const auto& [key, value] : it->items()) {
        char* end = nullptr;
        const long long id = std::strtoll(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX) {
          return InvalidArgument(aw.Field(key).str() + ": the key is not a token id");
        }
        if (!value.is_object()) return InvalidArgument(aw.Field(key).str() + ": not an object");
        GRIDFEED_ASSIGN_OR_RETURN(AddedToken t, TokenObject(value, aw.Field(key)));
        c.added_tokens_decoder.emplace_back(id, std::move(t));
      }
      std::sort(c.added_tokens_decoder.begin(), c.added_tokens_decoder.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  }
  const std::string map_file = (fs::path(folder) / "special_tokens_map.json").string();
  GRIDFEED_ASSIGN_OR_RETURN(auto map, ReadJsonIfPresent(map_file));
  if (map) {
    GRIDFEED_RETURN_IF_ERROR(ApplySpecials(*map, JsonWhere{map_file, ""}, /*from_map=*/true, &c));
  }
  const std::string jinja = (fs::path(folder) / "chat_template.jinja").string();
  std::error_code ec;
  if (fs::exists(jinja, ec)) {
    if (fs::file_size(jinja, ec) > kMaxConfigBytes) {
      return InvalidArgument(jinja + ": larger than " + std::to_string(kMaxConfigBytes) + " bytes");
    }
    GRIDFEED_ASSIGN_OR_RETURN(std::string t, io::ReadFileToString(jinja));
    c.chat_template = std::move(t);
  }
  return c;
}

}  // namespace gridfeed::text::hf
