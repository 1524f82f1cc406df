// SFT conversations as Megatron's SFTDataset and SFTTokenizer see them: a JSON Lines row's
// messages, cut into conversations at `system` messages, rendered by a prompt format, encoded,
// and given targets with the prompt tokens masked (IGNORE_INDEX -100). Algorithm: the design
// note on Megatron's SFT (tests/golden/megatron-sft/README.md, "Prompt formats", "Targets").
//
// Thread safety: a ChatFormatter is immutable after Make(); Tokenize is const and reentrant.
// It keeps a reference to the tokenizer, which must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::order::sft {

inline constexpr int64_t kIgnoreIndex = -100;

struct Message {
  Message() = default;
  Message(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
  std::string role;
  std::string content;  // the content when it is a string, else empty (content_is_string)
  // The row's message object as JSON (every key, nested objects and lists, in the row's key
  // order), what chat templates see; null for a message made in code, which templates see as
  // {"role": role, "content": content}.
  std::shared_ptr<const nlohmann::ordered_json> object;
  // False when the row's content is absent or not a string (null, a list of parts): only
  // chat templates (format `default`) can render such a message; the built-in formats refuse it.
  bool content_is_string = true;
};

// A conversation: its messages, and the row's "tools" and "documents" (null when the row has
// none; templates then see none, as transformers passes them).
struct Conversation : std::vector<Message> {
  using std::vector<Message>::vector;
  Conversation() = default;
  Conversation(std::vector<Message> messages)  // NOLINT: implicit by design
      : std::vector<Message>(std::move(messages)) {}
  std::shared_ptr<const nlohmann::ordered_json> tools;
  std::shared_ptr<const nlohmann::ordered_json> documents;
};

// One JSON Lines row `{"messages": [{"role": .., "content": .., ...}, ...], "tools": ..,
// "documents": ..}`: every message with its whole object, and the row's tools and documents.
// InvalidArgument naming `where` (e.g. "data.jsonl row 12") for anything else: not JSON, no
// "messages" array, a message that is not an object with a string "role".
Result<Conversation> ParseRow(std::string_view line, const std::string& where);

// Megatron's cut: every message whose role is exactly "system" starts a conversation; the
// messages before the first one form a conversation of their own. No empty conversation. Each
// conversation keeps the row's tools and documents.
std::vector<Conversation> SplitConversations(const Conversation& row);

enum class PromptFormat { kNemotronHAligned, kNemotronNanoV2, kIdentity, kDefault };
// "nemotron-h-aligned", "nemotron-nano-v2", "identity", "default"; InvalidArgument listing
// them otherwise.
Result<PromptFormat> ParsePromptFormat(std::string_view name);
std::string_view PromptFormatName(PromptFormat format);

// Python's str.strip() with no argument: removes leading and trailing code points for which
// str.isspace() is true (Unicode whitespace, U+001C..U+001F and U+0085 included). `text` is
// valid UTF-8.
std::string PyStrip(std::string_view text);

class ChatFormatter {
 public:
  // InvalidArgument when the format needs what the tokenizer lacks (a named token such as
  // <SPECIAL_233>, a chat template for `default`, or a template this renderer cannot render).
  static Result<std::unique_ptr<ChatFormatter>> Make(PromptFormat format,
                                                     const text::TextTokenizer& tokenizer);
  virtual ~ChatFormatter() = default;

  // The pad id SFTDataset pads with: <SPECIAL_233> (h-aligned), <unk> (nano-v2, identity), or
  // the unk token's id where the tokenizer lacks that string (convert_tokens_to_ids); the
  // tokenizer's pad token or else its eos (default).
  virtual int64_t pad_id() const = 0;
  // Megatron's tokenize_conversation: tokens = encode(render(conversation)), targets = tokens
  // with the prompt masked (none for `default`). Errors where Megatron raises or asserts (an
  // empty assistant content, an assistant not after user/tool, an unknown role, pieces that do
  // not concatenate to the whole), naming `where`.
  virtual Status Tokenize(const Conversation& conversation, const std::string& where,
                          std::vector<int64_t>* tokens, std::vector<int64_t>* targets) const = 0;
};

}  // namespace gridfeed::order::sft
