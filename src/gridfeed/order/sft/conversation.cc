// Megatron's SFT conversations (contract: conversation.h): rows, the cut at system messages, the
// four prompt formats and SFTTokenizer.tokenize_conversation's masking, error for error.
//
// The built-in formats are rendered directly from their templates' meaning (README "Prompt
// formats"): each template is a loop of exact-role branches over messages, so the rendering of a
// conversation is the concatenation of the renderings of its messages. `default` goes through
// ChatTemplate. PyStrip is defined in chat_template.cc, next to the other Python string rules.

#include "gridfeed/order/sft/conversation.h"

#include <new>
#include <nlohmann/json.hpp>

#include "gridfeed/core/memory_usage.h"
#include "gridfeed/order/sft/chat_template.h"

namespace gridfeed::order::sft {
namespace {

// Megatron compares role.lower() against ASCII names. Lowering only A-Z decides those
// comparisons exactly: the only other code points whose lowercase contains an ASCII letter are
// U+0130 (gives "i" plus U+0307, never a whole name) and U+212A (gives "k", in no name).
std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string ReplaceAll(std::string s, std::string_view from) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    pos = hit + from.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// c' of nemotron-nano-v2: every /think removed, then every /no_think.
std::string DropThinkMarkers(const std::string& c) {
  return ReplaceAll(ReplaceAll(c, "/think"), "/no_think");
}

class BuiltinFormatter final : public ChatFormatter {
 public:
  BuiltinFormatter(PromptFormat format, const text::TextTokenizer& tokenizer, int64_t pad)
      : format_(format), tokenizer_(tokenizer), pad_(pad) {}

  int64_t pad_id() const override { return pad_; }

  Status Tokenize(const Conversation& conversation, const std::string& where,
                  std::vector<int64_t>* tokens, std::vector<int64_t>* targets) const override {
    std::vector<std::string> pieces;
    pieces.reserve(conversation.size());
    std::string whole;
    for (size_t k = 0; k < conversation.size(); ++k) {
      if (!conversation[k].content_is_string) {
        return InvalidArgument(where + ", message " + std::to_string(k) +
                               ": \"content\" is absent or not a string; prompt format '" +
                               std::string(PromptFormatName(format_)) +
                               "' needs a string (only 'default' renders other contents)");
      }
    }
    for (const Message& m : conversation) {
      pieces.push_back(Render(m));
      whole += pieces.back();
    }
    auto encoded = tokenizer_.Encode(whole);
    if (!encoded.ok()) return encoded.status().WithContext(where);
    *tokens = std::move(encoded).value();
    *targets = *tokens;
    const size_t prefix = format_ == PromptFormat::kNemotronNanoV2 ? 3 : 0;
    const size_t total = tokens->size();
    size_t idx = 0;
    for (size_t k = 0; k < conversation.size(); ++k) {
      const std::string role = AsciiLower(conversation[k].role);
      const std::string at = where + ", message " + std::to_string(k);
      if (role == "assistant") {
        if (conversation[k].content.empty()) {
          return InvalidArgument(at + ": empty assistant turn (Megatron raises ValueError)");
        }
        // Python's conversation[-1] for the first message: the last one.
        const size_t prev = k == 0 ? conversation.size() - 1 : k - 1;
        const std::string prev_role = AsciiLower(conversation[prev].role);
        if (prev_role != "user" && prev_role != "tool") {
          return InvalidArgument(at + ": assistant turn after a '" + conversation[prev].role +
                                 "' message, not user or tool (Megatron's assertion)");
        }
      }
      auto turn = tokenizer_.Encode(pieces[k]);
      if (!turn.ok()) return turn.status().WithContext(at);
      const size_t n = turn->size();
      if (role == "system" || role == "user" || role == "tool") {
        for (size_t t = idx; t < std::min(total, idx + n); ++t) (*targets)[t] = kIgnoreIndex;
      } else if (role == "assistant") {
        for (size_t t = idx; t < std::min(total, idx + prefix); ++t) (*targets)[t] = kIgnoreIndex;
      } else {
        // As a JSON string: a role holding a NUL or control characters is shown whole.
        return InvalidArgument(at + ": role " + nlohmann::json(conversation[k].role).dump() +
                               " is not system, user, assistant or tool (Megatron raises "
                               "ValueError)");
      }
      // Megatron asserts the message's own tokens are the slice of the whole; any overrun also
      // fails there or at the final length check.
      if (idx + n > total || !std::equal(turn->begin(), turn->end(),
                                         tokens->begin() + static_cast<std::ptrdiff_t>(idx))) {
        return InvalidArgument(at +
                               ": the message's own tokens differ from its tokens inside "
                               "the conversation (Megatron's assertion)");
      }
      idx += n;
    }
    if (idx != total) {
      return InvalidArgument(where + ": the messages' tokens sum to " + std::to_string(idx) +
                             ", the conversation has " + std::to_string(total) +
                             " (Megatron's assertion)");
    }
    return Status::Ok();
  }

 private:
  // One message through the format's template; exact, case-sensitive role branches.
  std::string Render(const Message& m) const {
    const std::string& role = m.role;
    switch (format_) {
      case PromptFormat::kNemotronHAligned:
        if (role == "system") return "<SPECIAL_10>System\n" + PyStrip(m.content) + "\n";
        if (role == "user") {
          return "<SPECIAL_11>User\n" + PyStrip(m.content) + "\n<SPECIAL_11>Assistant\n";
        }
        if (role == "assistant") return PyStrip(m.content) + "\n";
        return "";
      case PromptFormat::kNemotronNanoV2:
        if (role == "system")
          return "<SPECIAL_10>System\n" + PyStrip(DropThinkMarkers(m.content)) + "\n";
        if (role == "user")
          return "<SPECIAL_11>User\n" + PyStrip(DropThinkMarkers(m.content)) + "\n";
        if (role == "assistant") {
          return "<SPECIAL_11>Assistant\n" + PyStrip(m.content) + "\n<SPECIAL_12>\n";
        }
        return "";
      default:  // identity
        return m.content;
    }
  }

  PromptFormat format_;
  const text::TextTokenizer& tokenizer_;
  int64_t pad_;
};

class TemplateFormatter final : public ChatFormatter {
 public:
  TemplateFormatter(const text::TextTokenizer& tokenizer, std::unique_ptr<ChatTemplate> tmpl,
                    ChatTemplateContext context, int64_t pad)
      : tokenizer_(tokenizer),
        template_(std::move(tmpl)),
        context_(std::move(context)),
        pad_(pad) {}

  int64_t pad_id() const override { return pad_; }

  // Format `default` masks nothing: targets are the tokens.
  Status Tokenize(const Conversation& conversation, const std::string& where,
                  std::vector<int64_t>* tokens, std::vector<int64_t>* targets) const override {
    auto text = template_->Render(conversation, context_);
    if (!text.ok()) return text.status().WithContext(where);
    auto encoded = tokenizer_.Encode(*text);
    if (!encoded.ok()) return encoded.status().WithContext(where);
    *tokens = std::move(encoded).value();
    *targets = *tokens;
    return Status::Ok();
  }

 private:
  const text::TextTokenizer& tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  ChatTemplateContext context_;
  int64_t pad_;
};

// The spelling of a special id, as transformers' special_tokens_map gives it to templates.
std::string TokenName(const text::TextTokenizer& tokenizer, std::optional<int64_t> id) {
  if (!id) return "";
  for (const auto& t : tokenizer.special_tokens()) {
    if (t.id == *id) return t.name;
  }
  return "";
}

}  // namespace

Result<Conversation> ParseRow(std::string_view line, const std::string& where) {
  using Json = nlohmann::ordered_json;
  // The parsed row takes a few times its text (object nodes, copies of the strings); a row
  // too large for this machine is named rather than ending in a bare std::bad_alloc.
  GRIDFEED_RETURN_IF_ERROR(
      CheckMemoryFor(4.0 * static_cast<double>(line.size()),
                     where + " (a row of " + std::to_string(line.size()) + " bytes)",
                     "; split the conversation into smaller rows"));
  Json row;
  try {
    row = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  } catch (const std::bad_alloc&) {
    return FailedPrecondition(where + ": out of memory parsing a row of " +
                              std::to_string(line.size()) + " bytes");
  }
  if (row.is_discarded()) return InvalidArgument(where + ": not valid JSON");
  if (!row.is_object()) return InvalidArgument(where + ": not a JSON object");
  auto it = row.find("messages");
  if (it == row.end() || !it->is_array()) {
    return InvalidArgument(where + ": no \"messages\" array");
  }
  Conversation out;
  out.reserve(it->size());
  for (size_t k = 0; k < it->size(); ++k) {
    Json& m = (*it)[k];
    const std::string at = where + ", message " + std::to_string(k);
    if (!m.is_object()) return InvalidArgument(at + ": not an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return InvalidArgument(at + ": no string \"role\"");
    Message msg;
    msg.role = role->get<std::string>();
    auto content = m.find("content");
    msg.content_is_string = content != m.end() && content->is_string();
    if (msg.content_is_string) msg.content = content->get<std::string>();
    msg.object = std::make_shared<const Json>(std::move(m));
    out.push_back(std::move(msg));
  }
  for (const char* key : {"tools", "documents"}) {
    auto t = row.find(key);
    if (t == row.end()) continue;
    auto value = std::make_shared<const Json>(std::move(*t));
    (std::string_view(key) == "tools" ? out.tools : out.documents) = std::move(value);
  }
  return out;
}

std::vector<Conversation> SplitConversations(const Conversation& row) {
  std::vector<Conversation> out;
  for (const Message& m : row) {
    if (out.empty() || m.role == "system") {
      out.emplace_back();
      out.back().tools = row.tools;
      out.back().documents = row.documents;
    }
    out.back().push_back(m);
  }
  return out;
}

Result<PromptFormat> ParsePromptFormat(std::string_view name) {
  for (PromptFormat f : {PromptFormat::kNemotronHAligned, PromptFormat::kNemotronNanoV2,
                         PromptFormat::kIdentity, PromptFormat::kDefault}) {
    if (name == PromptFormatName(f)) return f;
  }
  return InvalidArgument("unknown SFT prompt format '" + std::string(name) +
                         "' (nemotron-h-aligned, nemotron-nano-v2, identity, default)");
}

std::string_view PromptFormatName(PromptFormat format) {
  switch (format) {
    case PromptFormat::kNemotronHAligned:
      return "nemotron-h-aligned";
    case PromptFormat::kNemotronNanoV2:
      return "nemotron-nano-v2";
    case PromptFormat::kIdentity:
      return "identity";
    case PromptFormat::kDefault:
      return "default";
  }
  return "?";
}

Result<std::unique_ptr<ChatFormatter>> ChatFormatter::Make(PromptFormat format,
                                                           const text::TextTokenizer& tokenizer) {
  if (format == PromptFormat::kDefault) {
    const auto& src = tokenizer.chat_template();
    if (!src) {
      return InvalidArgument(tokenizer.path() + ": prompt format 'default' needs a chat_template");
    }
    auto tmpl = ChatTemplate::Parse(*src);
    if (!tmpl.ok()) return tmpl.status().WithContext(tokenizer.path());
    const std::optional<int64_t> pad = tokenizer.pad_id() ? tokenizer.pad_id() : tokenizer.eos_id();
    if (!pad) {
      return InvalidArgument(tokenizer.path() +
                             ": prompt format 'default' pads with the pad or "
                             "eos token; the tokenizer has neither");
    }
    ChatTemplateContext ctx;
    ctx.bos_token = TokenName(tokenizer, tokenizer.bos_id());
    ctx.eos_token = TokenName(tokenizer, tokenizer.eos_id());
    ctx.pad_token = TokenName(tokenizer, tokenizer.pad_id());
    ctx.unk_token = TokenName(tokenizer, tokenizer.unk_id());
    return std::unique_ptr<ChatFormatter>(
        std::make_unique<TemplateFormatter>(tokenizer, std::move(tmpl).value(), ctx, *pad));
  }
  const char* pad_name = format == PromptFormat::kNemotronHAligned ? "<SPECIAL_233>" : "<unk>";
  // Megatron's convert_tokens_to_ids: a string the tokenizer lacks is the unk token's id.
  std::optional<int64_t> pad = tokenizer.TokenId(pad_name);
  if (!pad) pad = tokenizer.unk_id();
  if (!pad) {
    return InvalidArgument(tokenizer.path() + ": prompt format '" +
                           std::string(PromptFormatName(format)) + "' pads with " + pad_name +
                           ", which the tokenizer lacks, and it has no unk token either");
  }
  return std::unique_ptr<ChatFormatter>(
      std::make_unique<BuiltinFormatter>(format, tokenizer, *pad));
}

}  // namespace gridfeed::order::sft
