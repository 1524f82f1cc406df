// The chat-template subset of Jinja (contract: chat_template.h), reproducing jinja2 3.1's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) as transformers 4.x builds
// it for apply_chat_template. Beyond the header's list it also accepts what Megatron's own
// prompt templates use: the str methods strip/lstrip/rstrip/replace/lower/upper/startswith/
// endswith, slices, list literals, `x if c else y`, `{% for %}...{% else %}`, and binds
// `tools`/`documents` to none as transformers does.
//
// The work is split by stage (internal contract: chat_template_ast.h): Python string helpers
// (chat_template_pystr.cc), values (chat_template_value.cc), the lexer
// (chat_template_lexer.cc), the parser (chat_template_parser.cc) and evaluation
// (chat_template_eval.cc). This file binds the globals and drives the stages.
//
// Also home of PyStrip (conversation.h): Python's whitespace set is needed by both files and
// lives in one place (chat_template_pystr.cc).
//
// Python semantics followed where they show in output: str() of values (True, None), and/or
// returning an operand, truthiness, int arithmetic, Undefined (prints as "", fails in + and
// attribute access, `in` it is false), code-point indexing of strings. lower/upper are
// ASCII-only and refuse other text (full Unicode case mapping is not carried here).

#include "gridfeed/order/sft/chat_template.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "gridfeed/io/text_tokenizer.h"
#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft {
namespace {

using chat_template_internal::Lex;
using chat_template_internal::List;
using chat_template_internal::Node;
using chat_template_internal::NormalizeNewlines;
using chat_template_internal::ParseTemplate;
using chat_template_internal::RenderTemplate;
using chat_template_internal::Segment;
using chat_template_internal::Value;

class ChatTemplateImpl final : public ChatTemplate {
 public:
  explicit ChatTemplateImpl(std::vector<Node> nodes) : nodes_(std::move(nodes)) {}

  Result<std::string> Render(const Conversation& messages,
                             const ChatTemplateContext& context) const override {
    List msgs;
    for (size_t k = 0; k < messages.size(); ++k) {
      const Message& m = messages[k];
      if (!io::DecodeUtf8(m.role).ok() || !io::DecodeUtf8(m.content).ok()) {
        return InvalidArgument("chat template: message " + std::to_string(k) +
                               " is not valid UTF-8");
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
    const std::pair<const char*, const std::string*> tokens[] = {{"bos_token", &context.bos_token},
                                                                 {"eos_token", &context.eos_token},
                                                                 {"pad_token", &context.pad_token},
                                                                 {"unk_token", &context.unk_token}};
    for (const auto& [name, value] : tokens) {
      if (!value->empty()) globals[name] = Value::Str(*value);
    }
    return RenderTemplate(nodes_, std::move(globals));
  }

 private:
  std::vector<Node> nodes_;
};

}  // namespace

std::string PyStrip(std::string_view text) {
  return chat_template_internal::PyStripImpl(text, std::nullopt, true, true);
}

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(std::string_view source) {
  if (auto v = io::DecodeUtf8(source); !v.ok()) {
    return InvalidArgument("chat template: " + v.status().message());
  }
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<Segment> segs, Lex(NormalizeNewlines(source)));
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<Node> nodes, ParseTemplate(std::move(segs)));
  return std::unique_ptr<ChatTemplate>(std::make_unique<ChatTemplateImpl>(std::move(nodes)));
}

}  // namespace gridfeed::order::sft
