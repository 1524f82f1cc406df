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
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/text_tokenizer.h"

namespace gridfeed::order::sft {

inline constexpr int64_t kIgnoreIndex = -100;

struct Message {
  std::string role;
  std::string content;
};
using Conversation = std::vector<Message>;

// One JSON Lines row `{"messages": [{"role": .., "content": ..}, ...]}`. InvalidArgument naming
// `where` (e.g. "data.jsonl row 12") for anything else: not JSON, no "messages" array, a
// message that is not an object with string "role" and "content".
Result<std::vector<Message>> ParseRow(std::string_view line, const std::string& where);

// Megatron's cut: every message whose role is exactly "system" starts a conversation; the
// messages before the first one form a conversation of their own. No empty conversation.
std::vector<Conversation> SplitConversations(const std::vector<Message>& messages);

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
                                                     const io::TextTokenizer& tokenizer);
  virtual ~ChatFormatter() = default;

  // The pad id SFTDataset pads with: <SPECIAL_233> (h-aligned), <unk> (nano-v2, identity), the
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
