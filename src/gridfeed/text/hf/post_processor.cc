#include "gridfeed/text/hf/post_processor.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;

// A template: each item is the sequence ($A) or a special token's ids.
class Template final : public PostProcessor {
 public:
  struct Item {
    bool sequence = false;
    std::vector<int32_t> ids;  // when not the sequence
  };
  explicit Template(std::vector<Item> items) : items_(std::move(items)) {}
  void Process(std::vector<int32_t>* ids) const override {
    if (items_.size() == 1 && items_[0].sequence) return;
    std::vector<int32_t> out;
    out.reserve(ids->size() + 4);
    for (const Item& it : items_) {
      if (it.sequence) {
        out.insert(out.end(), ids->begin(), ids->end());
      } else {
        out.insert(out.end(), it.ids.begin(), it.ids.end());
      }
    }
    *ids = std::move(out);
  }

 private:
  std::vector<Item> items_;
};

class Identity final : public PostProcessor {
 public:
  void Process(std::vector<int32_t>*) const override {}
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> p) : p_(std::move(p)) {}
  void Process(std::vector<int32_t>* ids) const override {
    for (const auto& p : p_) p->Process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> p_;
};

Result<int32_t> Id(const json& v, const JsonWhere& w) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    return InvalidArgument(w.str() + ": " + v.dump() + " is not a token id");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

// Bert/Roberta's ["[SEP]", 102].
Result<int32_t> TokenPair(const json& j, std::string_view key, const JsonWhere& where) {
  auto it = j.find(key);
  const JsonWhere w = where.Field(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string()) {
    return InvalidArgument(w.str() + ": expected [\"token\", id]");
  }
  return Id((*it)[1], w.Index(1));
}

// One template piece: {"Sequence": {"id": "A", ...}}, {"SpecialToken": {"id": "<s>", ...}} or
// the string form "$A", "$B:1", "<s>", "<s>:0".
struct ParsedPiece {
  bool sequence = false;
  std::string seq_or_token;  // "A"/"B" or the special token's id
};

Result<ParsedPiece> ParsePiece(const json& p, const JsonWhere& w) {
  if (p.is_string()) {
    std::string s = p.get<std::string>();
    if (auto colon = s.find(':'); colon != std::string::npos) {
      const std::string type = s.substr(colon + 1);
      if (type.empty() || type.find_first_not_of("0123456789") != std::string::npos) {
        return InvalidArgument(w.str() + ": cannot read template piece '" + s + "'");
      }
      s.resize(colon);
    }
    if (s.starts_with('$')) {
      const std::string rest = s.substr(1);
      if (rest.empty() || rest == "A" || rest == "a" ||
          rest.find_first_not_of("0123456789") == std::string::npos) {
        return ParsedPiece{true, "A"};
      }
      if (rest == "B" || rest == "b") return ParsedPiece{true, "B"};
      return InvalidArgument(w.str() + ": cannot read template piece '" + p.get<std::string>() +
                             "'");
    }
    return ParsedPiece{false, s};
  }
  if (p.is_object() && p.size() == 1) {
    const std::string& kind = p.begin().key();
    const json& body = p.begin().value();
    auto id = body.is_object() ? body.find("id") : body.end();
    if (body.is_object() && id != body.end() && id->is_string()) {
      if (kind == "Sequence") {
        const std::string s = id->get<std::string>();
        if (s == "A" || s == "B") return ParsedPiece{true, s};
      } else if (kind == "SpecialToken") {
        return ParsedPiece{false, id->get<std::string>()};
      }
    }
  }
  return InvalidArgument(w.str() + ": expected {\"Sequence\": {\"id\": \"A\"|\"B\"}} or " +
                         "{\"SpecialToken\": {\"id\": ...}}");
}

Result<std::unique_ptr<PostProcessor>> MakeTemplate(const json& j, const JsonWhere& where) {
  std::map<std::string, std::vector<int32_t>> specials;
  if (auto st = j.find("special_tokens"); st != j.end() && !st->is_null()) {
    const JsonWhere w = where.Field("special_tokens");
    if (!st->is_object()) return InvalidArgument(w.str() + ": not an object");
    for (const auto& [name, tok] : st->items()) {
      const JsonWhere tw = w.Field(name);
      auto ids = tok.is_object() ? tok.find("ids") : tok.end();
      if (!tok.is_object() || ids == tok.end() || !ids->is_array()) {
        return InvalidArgument(tw.str() + ": expected {\"id\", \"ids\", \"tokens\"}");
      }
      std::vector<int32_t> v;
      for (size_t i = 0; i < ids->size(); ++i) {
        GRIDFEED_ASSIGN_OR_RETURN(int32_t id, Id((*ids)[i], tw.Field("ids").Index(i)));
        v.push_back(id);
      }
      specials[name] = std::move(v);
    }
  }
  std::vector<Template::Item> single;
  for (const char* key : {"single", "pair"}) {
    const JsonWhere w = where.Field(key);
    auto t = j.find(key);
    if (t == j.end()) return InvalidArgument(w.str() + ": missing");
    json list = *t;
    if (list.is_string()) {  // "$A <s>": whitespace-separated pieces
      json split = json::array();
      std::string s = list.get<std::string>(), cur;
      for (char c : s + " ") {
        if (c == ' ') {
          if (!cur.empty()) split.push_back(cur);
          cur.clear();
        } else {
          cur += c;
        }
      }
      list = split;
    }
    if (!list.is_array()) return InvalidArgument(w.str() + ": not a list");
    for (size_t i = 0; i < list.size(); ++i) {
      GRIDFEED_ASSIGN_OR_RETURN(ParsedPiece p, ParsePiece(list[i], w.Index(i)));
      Template::Item item;
      if (p.sequence) {
        if (std::string_view(key) == "single" && p.seq_or_token != "A") {
          return InvalidArgument(w.Index(i).str() + ": the single template names sequence B");
        }
        item.sequence = true;
      } else {
        auto s = specials.find(p.seq_or_token);
        if (s == specials.end()) {
          return InvalidArgument(w.Index(i).str() + ": special token '" + p.seq_or_token +
                                 "' is not in special_tokens");
        }
        item.ids = s->second;
      }
      if (std::string_view(key) == "single") single.push_back(std::move(item));
    }
  }
  return std::unique_ptr<PostProcessor>(std::make_unique<Template>(std::move(single)));
}

}  // namespace

std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos,
                                                   std::optional<int32_t> eos) {
  std::vector<Template::Item> items;
  if (bos) items.push_back({false, {*bos}});
  items.push_back({true, {}});
  if (eos) items.push_back({false, {*eos}});
  return std::make_unique<Template>(std::move(items));
}

Result<std::unique_ptr<PostProcessor>> MakePostProcessor(const json& j, const JsonWhere& where) {
  if (!j.is_object()) return InvalidArgument(where.str() + ": not an object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) {
    return InvalidArgument(where.Field("type").str() + ": missing or not a string");
  }
  const auto& type = t->get_ref<const std::string&>();
  if (type == "TemplateProcessing") return MakeTemplate(j, where);
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(std::make_unique<Identity>());
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    GRIDFEED_ASSIGN_OR_RETURN(int32_t sep, TokenPair(j, "sep", where));
    GRIDFEED_ASSIGN_OR_RETURN(int32_t cls, TokenPair(j, "cls", where));
    return MakeBosEosProcessor(cls, sep);
  }
  if (type == "Sequence") {
    auto p = j.find("processors");
    const JsonWhere w = where.Field("processors");
    if (p == j.end() || !p->is_array()) return InvalidArgument(w.str() + ": missing or not a list");
    std::vector<std::unique_ptr<PostProcessor>> v;
    for (size_t i = 0; i < p->size(); ++i) {
      GRIDFEED_ASSIGN_OR_RETURN(auto one, MakePostProcessor((*p)[i], w.Index(i)));
      v.push_back(std::move(one));
    }
    return std::unique_ptr<PostProcessor>(std::make_unique<Sequence>(std::move(v)));
  }
  return InvalidArgument(
      where.Field("type").str() + ": post-processor type '" + type +
      "' is not supported (gridfeed reads TemplateProcessing, ByteLevel, BertProcessing, " +
      "RobertaProcessing, Sequence)");
}

}  // namespace gridfeed::text::hf
