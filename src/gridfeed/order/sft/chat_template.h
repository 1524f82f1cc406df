// gridfeed's own Jinja engine for chat templates, rendering as Hugging Face transformers 4.x
// renders them in apply_chat_template: jinja2 3.1's ImmutableSandboxedEnvironment with
// trim_blocks and lstrip_blocks, the loopcontrols extension (break, continue), transformers'
// {% generation %} (renders its body), its tojson (json.dumps with ensure_ascii=False and the
// indent, separators, sort_keys and ensure_ascii arguments), raise_exception(msg) and
// strftime_now(format).
//
// Supported: text, comments, whitespace control (- and +), {% raw %}; {{ expr }}; {% for %}
// (several targets `k, v`, a filter `if cond`, {% else %}, `loop` with index, index0, revindex,
// revindex0, first, last, length, depth, previtem, nextitem and cycle()), {% if %}/{% elif %}/
// {% else %}, {% set %} (names, tuples, `ns.attr`, and the block form with optional filters),
// {% macro %} with defaults and keyword arguments, {% call %} with `caller`, {% filter %}.
// Expressions: literals (str with Python's escapes, int within int64, float, bool, none, list,
// tuple, dict with str keys), attribute and item access, slices with steps, calls with keyword
// arguments, + - * / // % ** (int overflow beyond int64 is an error, never a wrong number), ~,
// comparisons and `in`, and/or/not, `x if c else y`, string `%` formatting (%s %r %d %i).
// Globals: namespace(), range() (the sandbox's 100,000 cap), dict(), raise_exception,
// strftime_now. Filters: abs attr capitalize center count d default dictsort e escape first
// float forceescape format indent int items join last length list lower map max min reject
// rejectattr replace reverse round safe select selectattr sort string sum title tojson trim
// unique upper wordcount. Tests: defined undefined none boolean false true integer float number
// string mapping iterable sequence callable sameas escaped in lower upper eq equalto == ne !=
// lt lessthan < le <= gt greaterthan > ge >= divisibleby odd even filter test. Methods: str
// (strip/lstrip/rstrip with chars, split/rsplit with maxsplit, splitlines, startswith/endswith
// with tuples and bounds, replace, find/rfind/index/rindex/count, join, format ({} {0} {name}
// with !s/!r, no format specs), lower/upper/title/capitalize/swapcase/casefold with full Unicode
// case mapping as CPython, removeprefix/removesuffix, partition/rpartition, center/ljust/rjust/
// zfill, the is* predicates), dict (items, keys, values, get, copy), list and tuple (index,
// count, copy). Python's semantics are followed where they show in output: str() and repr() of
// values, truthiness (a generator is always true), Undefined (prints as "", iterates empty,
// fails in arithmetic and attribute access), code-point indexing of strings, stable sorts.
//
// Refused, with an error naming the template's line and column, never rendered differently:
// a syntax error; a tag, filter, test or global that is not listed (include, import, extends,
// block, with, do, recursive loops, batch, groupby, truncate...); a str/dict/list method not
// listed, or one the sandbox forbids (list.append, dict.update...), when called; integers
// beyond int64; printing what Python prints as an object address (generators, functions,
// Markup inside other values); combining a Markup string (|safe, |escape) with other values.
//
// Inputs (Render): `messages` is a list of the conversation's message objects, every key and
// value as JSON values (nested objects and lists included); a message built in code without its
// object is {"role": .., "content": ..}. `tools` and `documents` are the row's, or none when it
// has none (transformers passes None). bos_token/eos_token/pad_token/unk_token when the
// tokenizer has them (else undefined), add_generation_prompt.
//
// Bounds (ChatTemplateLimits; the defaults are documented constants, raise them through the
// limits given to Parse and in the context given to Render): nesting of blocks and of
// expressions when parsing (kDefaultMaxDepth), render recursion (2 x that: macros calling
// macros; under 2 MiB of stack at the default), work (kDefaultMaxSteps: one step per node,
// expression, loop iteration and element made by a repeat, range or join) and bytes
// (kDefaultMaxBytes: the output and any one string or list a template builds, `'x' * n` and `[0] *
// n` checked before they are made). Passing a bound is an error naming the limit and the template
// position.
//
// Thread safety: a parsed ChatTemplate is immutable; Render is const and reentrant.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gridfeed/core/status.h"
#include "gridfeed/order/sft/conversation.h"

namespace gridfeed::order::sft {

struct ChatTemplateLimits {
  static constexpr int kDefaultMaxDepth = 256;
  static constexpr int64_t kDefaultMaxSteps = 100'000'000;
  static constexpr int64_t kDefaultMaxBytes = int64_t{256} << 20;  // 256 MiB
  int max_depth = kDefaultMaxDepth;
  int64_t max_steps = kDefaultMaxSteps;
  int64_t max_bytes = kDefaultMaxBytes;
};

struct ChatTemplateContext {
  std::string bos_token;  // empty when the tokenizer has none
  std::string eos_token;
  std::string pad_token;
  std::string unk_token;
  bool add_generation_prompt = false;
  // What strftime_now formats (local broken-down time); unset: the local time at render.
  std::optional<std::tm> now;
  ChatTemplateLimits limits;
};

class ChatTemplate {
 public:
  // InvalidArgument "chat template: <what> at line L, column C" for a syntax error or a
  // construct outside the supported set.
  static Result<std::unique_ptr<ChatTemplate>> Parse(std::string_view source,
                                                     const ChatTemplateLimits& limits = {});
  virtual ~ChatTemplate() = default;
  // InvalidArgument "chat template: <what> at line L, column C" for a runtime error
  // (raise_exception, an undefined value used where Jinja raises, a bound passed), or naming
  // the message for an input value outside the supported set (an integer beyond int64).
  virtual Result<std::string> Render(const Conversation& messages,
                                     const ChatTemplateContext& context) const = 0;
};

}  // namespace gridfeed::order::sft
