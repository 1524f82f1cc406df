// The subset of Jinja that chat templates use, rendered as Hugging Face transformers 4.x
// renders them for apply_chat_template (trim_blocks and lstrip_blocks on, add_generation_prompt
// false unless asked): text, {{ expr }}, {% for %}/{% endfor %} with `loop`, {% if %}/{% elif
// %}/{% else %}/{% endif %}, {% set %}, whitespace control (-), comments; expressions with
// string/number/bool/none literals, variables, attribute and item access, + and ~, comparisons,
// and/or/not, `in`, `is defined`/`is none`, `x if c else y`, slices and list literals, the
// filters trim, lower, upper, length, the string methods strip/lstrip/rstrip/replace/lower/upper/
// startswith/endswith, and raise_exception(msg); `tools` and `documents` are none, as
// transformers passes them. lower/upper handle ASCII only and refuse other text (never a silent
// difference from Python). Anything else is refused when the template is parsed, naming it.
//
// Thread safety: a parsed ChatTemplate is immutable; Render is const and reentrant.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gridfeed/core/status.h"
#include "gridfeed/order/sft/conversation.h"

namespace gridfeed::order::sft {

struct ChatTemplateContext {
  std::string bos_token;  // empty when the tokenizer has none
  std::string eos_token;
  std::string pad_token;
  std::string unk_token;
  bool add_generation_prompt = false;
};

class ChatTemplate {
 public:
  // InvalidArgument naming the construct and its offset for what the subset does not cover.
  static Result<std::unique_ptr<ChatTemplate>> Parse(std::string_view source);
  virtual ~ChatTemplate() = default;
  // `messages` is bound to a list of {role, content} dicts. InvalidArgument for a runtime error
  // (raise_exception, an undefined name used where Jinja raises).
  virtual Result<std::string> Render(const Conversation& messages,
                                     const ChatTemplateContext& context) const = 0;
};

}  // namespace gridfeed::order::sft
