// The chat-template engine's boundary (contract: chat_template.h): validates the source, drives
// the stages (internal contract: chat_template_ast.h), turns the rows' JSON message objects
// into template values, binds the globals as transformers passes them, and turns the error
// offsets into lines and columns.
//
// Also home of PyStrip (conversation.h): Python's whitespace set is needed by both files and
// lives in one place (chat_template_pystr.cc).

#include "gridfeed/order/sft/chat_template.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::order::sft {
namespace {

using chat_template_internal::Dict;
using chat_template_internal::Lex;
using chat_template_internal::List;
using chat_template_internal::Node;
using chat_template_internal::NormalizeNewlines;
using chat_template_internal::ParseTemplate;
using chat_template_internal::RenderEnv;
using chat_template_internal::RenderTemplate;
using chat_template_internal::Segment;
using chat_template_internal::Value;

// " at offset N" at the end of an error becomes " at line L, column C" (1-based; the column
// counts code points) in the newline-normalised source, whose lines are the template's.
Status Locate(const Status& st, const std::string& src) {
  if (st.ok()) return st;
  const std::string& m = st.message();
  const std::string key = " at offset ";
  const size_t at = m.rfind(key);
  if (at == std::string::npos) return st;
  size_t off = 0;
  for (size_t k = at + key.size(); k < m.size(); ++k) {
    if (m[k] < '0' || m[k] > '9') return st;
    off = off * 10 + static_cast<size_t>(m[k] - '0');
  }
  off = std::min(off, src.size());
  size_t line = 1, col = 1;
  for (size_t k = 0; k < off; ++k) {
    if (src[k] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(src[k]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  return InvalidArgument(m.substr(0, at) + " at line " + std::to_string(line) + ", column " +
                         std::to_string(col));
}

// A JSON value of a row as a template value: objects keep their key order (Python's json).
Result<Value> FromJson(const nlohmann::ordered_json& j, const std::string& where, int depth) {
  using J = nlohmann::ordered_json;
  if (depth > chat_template_internal::Limits{}.max_depth) {
    return InvalidArgument("chat template: " + where + " is nested deeper than " +
                           std::to_string(chat_template_internal::Limits{}.max_depth));
  }
  switch (j.type()) {
    case J::value_t::null:
      return Value::None();
    case J::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case J::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case J::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return InvalidArgument("chat template: " + where + " holds the integer " +
                               std::to_string(u) + ", beyond int64 (not supported)");
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case J::value_t::number_float:
      return Value::Float(j.get<double>());
    case J::value_t::string:
      return Value::Str(j.get<std::string>());
    case J::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, FromJson(e, where, depth + 1));
        l.push_back(std::move(v));
      }
      return Value::MakeList(std::move(l));
    }
    case J::value_t::object: {
      Dict d;
      d.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, FromJson(it.value(), where, depth + 1));
        d.emplace_back(it.key(), std::move(v));
      }
      return Value::MakeDict(std::move(d));
    }
    default:
      return InvalidArgument("chat template: " + where + " holds a value JSON does not have");
  }
}

class ChatTemplateImpl final : public ChatTemplate {
 public:
  ChatTemplateImpl(std::vector<Node> nodes, std::string source)
      : nodes_(std::move(nodes)), source_(std::move(source)) {}

  Result<std::string> Render(const Conversation& messages,
                             const ChatTemplateContext& context) const override {
    List msgs;
    for (size_t k = 0; k < messages.size(); ++k) {
      const Message& m = messages[k];
      const std::string where = "message " + std::to_string(k);
      if (m.object) {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, FromJson(*m.object, where, 0));
        msgs.push_back(std::move(v));
        continue;
      }
      if (!text::DecodeUtf8(m.role).ok() || !text::DecodeUtf8(m.content).ok()) {
        return InvalidArgument("chat template: " + where + " is not valid UTF-8");
      }
      msgs.push_back(
          Value::MakeDict({{"role", Value::Str(m.role)}, {"content", Value::Str(m.content)}}));
    }
    std::map<std::string, Value> globals;
    globals["messages"] = Value::MakeList(std::move(msgs));
    globals["add_generation_prompt"] = Value::Bool(context.add_generation_prompt);
    // transformers passes tools and documents explicitly (None when not given) and only the
    // special tokens the tokenizer has.
    globals["tools"] = Value::None();
    globals["documents"] = Value::None();
    if (messages.tools) {
      GRIDFEED_ASSIGN_OR_RETURN(globals["tools"], FromJson(*messages.tools, "tools", 0));
    }
    if (messages.documents) {
      GRIDFEED_ASSIGN_OR_RETURN(globals["documents"],
                                FromJson(*messages.documents, "documents", 0));
    }
    const std::pair<const char*, const std::string*> tokens[] = {{"bos_token", &context.bos_token},
                                                                 {"eos_token", &context.eos_token},
                                                                 {"pad_token", &context.pad_token},
                                                                 {"unk_token", &context.unk_token}};
    for (const auto& [name, value] : tokens) {
      if (!value->empty()) globals[name] = Value::Str(*value);
    }
    RenderEnv env;
    env.limits.max_depth = context.limits.max_depth;
    env.limits.max_steps = context.limits.max_steps;
    env.limits.max_bytes = context.limits.max_bytes;
    if (context.now) {
      env.now = *context.now;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &env.now);
    }
    auto r = RenderTemplate(nodes_, std::move(globals), env);
    if (!r.ok()) return Locate(r.status(), source_);
    return r;
  }

 private:
  std::vector<Node> nodes_;
  std::string source_;  // newline-normalised, for error positions
};

}  // namespace

std::string PyStrip(std::string_view text) {
  return chat_template_internal::PyStripImpl(text, std::nullopt, true, true);
}

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(std::string_view source,
                                                          const ChatTemplateLimits& limits) {
  if (auto v = text::DecodeUtf8(source); !v.ok()) {
    return InvalidArgument("chat template: " + v.status().message());
  }
  std::string src = NormalizeNewlines(source);
  auto segs = Lex(src);
  if (!segs.ok()) return Locate(segs.status(), src);
  auto nodes = ParseTemplate(std::move(segs).value(), limits.max_depth);
  if (!nodes.ok()) return Locate(nodes.status(), src);
  return std::unique_ptr<ChatTemplate>(
      std::make_unique<ChatTemplateImpl>(std::move(nodes).value(), std::move(src)));
}

}  // namespace gridfeed::order::sft
