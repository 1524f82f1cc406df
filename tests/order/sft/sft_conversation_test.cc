// SFT conversations against Megatron: every folder of $GRIDFEED_SFT_GOLDEN_DIR/tokenized/
// (<corpus>__<format>__<tok>, found at run time so a holdout set runs with the same binary) is
// recomputed conversation by conversation; plus the Python string rules, the Jinja subset's
// whitespace handling (expected strings from jinja2 3.1 with trim_blocks and lstrip_blocks, as
// transformers 4.x configures it) and Megatron's error cases.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gridfeed/io/npy.h"
#include "gridfeed/order/sft/chat_template.h"
#include "gridfeed/order/sft/conversation.h"
#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::order::sft {
namespace {

namespace fs = std::filesystem;

const std::string kGolden = GRIDFEED_SFT_GOLDEN_DIR;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int64_t> ReadInts(const fs::path& p) {
  auto a = io::ReadNpy(p.string());
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? a->ToInt64() : std::vector<int64_t>{};
}

std::unique_ptr<text::TextTokenizer> LoadTok(const std::string& name) {
  auto t = text::LoadTextTokenizer(kGolden + "/tokenizers/" + name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Goldens.

TEST(SftGolden, EveryTokenizedFolderMatches) {
  const fs::path root = fs::path(kGolden) / "tokenized";
  ASSERT_TRUE(fs::is_directory(root)) << root;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory()) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  ASSERT_FALSE(dirs.empty());
  std::map<std::string, std::unique_ptr<text::TextTokenizer>> toks;
  int64_t folders = 0, conversations = 0;
  for (const fs::path& dir : dirs) {
    SCOPED_TRACE(dir.filename().string());
    const std::string name = dir.filename().string();
    const size_t a = name.find("__"), b = name.rfind("__");
    ASSERT_TRUE(a != std::string::npos && b > a) << name;
    const std::string corpus = name.substr(0, a), format_name = name.substr(a + 2, b - a - 2),
                      tok_name = name.substr(b + 2);
    auto format = ParsePromptFormat(format_name);
    ASSERT_TRUE(format.ok()) << format.status().ToString();
    auto& tok = toks[tok_name];
    if (!tok) tok = LoadTok(tok_name);
    ASSERT_TRUE(tok);
    auto fmt = ChatFormatter::Make(*format, *tok);
    ASSERT_TRUE(fmt.ok()) << fmt.status().ToString();

    const auto conv_row = ReadInts(dir / "conv_row.npy");
    const auto conv_index = ReadInts(dir / "conv_index_in_row.npy");
    const auto offsets = ReadInts(dir / "offsets.npy");
    const auto tokens = ReadInts(dir / "tokens.npy");
    const auto targets = ReadInts(dir / "targets.npy");
    ASSERT_EQ(conv_row.size(), conv_index.size());
    ASSERT_EQ(offsets.size(), conv_row.size() + 1);
    ASSERT_EQ(tokens.size(), targets.size());
    ASSERT_EQ(static_cast<size_t>(offsets.back()), tokens.size());

    std::ifstream in(fs::path(kGolden) / "corpora" / (corpus + ".jsonl"));
    ASSERT_TRUE(in) << corpus;
    std::string line;
    size_t c = 0;
    for (int64_t row = 0; std::getline(in, line); ++row) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = corpus + ".jsonl row " + std::to_string(row);
      auto messages = ParseRow(line, where);
      ASSERT_TRUE(messages.ok()) << messages.status().ToString();
      const auto convs = SplitConversations(*messages);
      for (size_t k = 0; k < convs.size(); ++k, ++c) {
        ASSERT_LT(c, conv_row.size()) << where << ": more conversations than stored";
        ASSERT_EQ(conv_row[c], row) << "conversation " << c;
        ASSERT_EQ(conv_index[c], static_cast<int64_t>(k)) << "conversation " << c;
        std::vector<int64_t> got_tokens, got_targets;
        Status st = (*fmt)->Tokenize(convs[k], where, &got_tokens, &got_targets);
        ASSERT_TRUE(st.ok()) << st.ToString();
        const auto begin = static_cast<ptrdiff_t>(offsets[c]),
                   end = static_cast<ptrdiff_t>(offsets[c + 1]);
        const std::vector<int64_t> want_tokens(tokens.begin() + begin, tokens.begin() + end);
        const std::vector<int64_t> want_targets(targets.begin() + begin, targets.begin() + end);
        ASSERT_EQ(got_tokens, want_tokens) << where << " conversation " << k;
        ASSERT_EQ(got_targets, want_targets) << where << " conversation " << k;
      }
    }
    ASSERT_EQ(c, conv_row.size()) << "fewer conversations than stored";
    ++folders;
    conversations += static_cast<int64_t>(c);
  }
  std::cout << "[ golden   ] " << folders << " tokenized folders, " << conversations
            << " conversations compared\n";
}

// The cases' derived pad ids (case.json) come from the same formatter.
TEST(SftGolden, PadIdsMatchCases) {
  const fs::path root = fs::path(kGolden) / "cases";
  ASSERT_TRUE(fs::is_directory(root));
  int checked = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!fs::exists(e.path() / "case.json")) continue;
    SCOPED_TRACE(e.path().filename().string());
    const auto j = nlohmann::json::parse(ReadFile(e.path() / "case.json"));
    const auto& in = j.at("inputs");
    auto format = ParsePromptFormat(in.at("prompt_format").get<std::string>());
    ASSERT_TRUE(format.ok());
    auto tok = text::LoadTextTokenizer(kGolden + "/" + in.at("tokenizer_dir").get<std::string>());
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    auto fmt = ChatFormatter::Make(*format, **tok);
    ASSERT_TRUE(fmt.ok());
    const auto& derived = j.at("derived");
    EXPECT_EQ((*fmt)->pad_id(), derived.at("tokenizer_pad").get<int64_t>());
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// ---------------------------------------------------------------------------------------------
// Python's str.strip().

TEST(SftPyStrip, UnicodeWhitespace) {
  EXPECT_EQ(PyStrip("\xc2\xa0"
                    "a b\xc2\xa0"),
            "a b");  // U+00A0
  EXPECT_EQ(PyStrip("\xe3\x80\x80"
                    "x\xe3\x80\x80"),
            "x");  // U+3000
  EXPECT_EQ(PyStrip("\xc2\x85"
                    "y\xc2\x85"),
            "y");  // U+0085
  EXPECT_EQ(PyStrip("\x1c\x1d\x1e\x1f"
                    "z\x1f"),
            "z");  // U+001C..U+001F
  EXPECT_EQ(PyStrip("\xe2\x80\x80\xe2\x80\x8a\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\x9f"
                    "w\xe1\x9a\x80"),
            "w");  // U+2000, 200A, 2028, 2029, 202F, 205F, 1680
  EXPECT_EQ(PyStrip(" \t\n\r\v\fq \t\n\r\v\f"), "q");
  EXPECT_EQ(PyStrip("   "), "");
  EXPECT_EQ(PyStrip(""), "");
  // Not whitespace for Python: U+200B, U+FEFF, U+180E.
  EXPECT_EQ(PyStrip("\xe2\x80\x8b"
                    "a"),
            "\xe2\x80\x8b"
            "a");
  EXPECT_EQ(PyStrip("a\xef\xbb\xbf"), "a\xef\xbb\xbf");
  EXPECT_EQ(PyStrip("\xe1\xa0\x8e"
                    "a"),
            "\xe1\xa0\x8e"
            "a");
  EXPECT_EQ(PyStrip(" \xc3\xa9 "), "\xc3\xa9");
}

// ---------------------------------------------------------------------------------------------
// The Jinja subset.

Conversation Msgs() {
  return {{"system",
           " \xc2\xa0"
           "Be brief.\xe3\x80\x80"},
          {"user",
           "\xc2\x85"
           "Hi\n"},
          {"assistant", "Hello /think \x1c"}};
}

ChatTemplateContext Ctx() {
  ChatTemplateContext c;
  c.bos_token = "<s>";
  c.eos_token = "</s>";
  c.unk_token = "<unk>";
  c.pad_token = "<SPECIAL_21>";
  return c;
}

std::string RenderOk(const std::string& src, const Conversation& msgs = Msgs(),
                     const ChatTemplateContext& ctx = Ctx()) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().ToString();
  auto r = (*t)->Render(msgs, ctx);
  if (!r.ok()) return "RENDER ERROR: " + r.status().ToString();
  return *r;
}

struct Case {
  const char* src;
  const char* want;
};

TEST(SftChatTemplate, WhitespaceControlAsJinja) {
  const Case cases[] = {
      // trim_blocks eats the newline after %}, lstrip_blocks the indent before {%, never {{.
      {"{% for m in messages %}\n  {% if loop.first %}\n  F\n  {% endif %}\n  {{ m.role }}\n{% "
       "endfor "
       "%}\n",
       "  F\n  system\n  user\n  assistant\n"},
      {"a\n  {# note #}\nb", "a\nb"},
      {"a\n  {#- note #}\nb", "ab"},
      {"a  {%+ if true %}x{% endif +%}\ny", "a  x\ny"},
      {"{% if true -%}   \n\t x {%- endif %}|", "x|"},
      // lstrip_blocks strips any Unicode whitespace (jinja2 3.1 uses \s), here U+00A0 U+3000.
      {"line\n\xc2\xa0\xe3\x80\x80{% if true %}z{% endif %}", "line\nz"},
      // not after text on the same line
      {"a\xc2\xa0 {% if true %}b{% endif %}", "a\xc2\xa0 b"},
      {"\n  {{ 'v' }}\n", "\n  v"},  // one trailing newline is dropped
      {"x\r\ny\rz\n\n", "x\ny\nz\n"},
      {"{{- '  a' -}}  \n {{ 'b' }}", "  ab"},
  };
  for (const Case& c : cases) EXPECT_EQ(RenderOk(c.src), c.want) << c.src;
}

TEST(SftChatTemplate, ExpressionsAsJinja) {
  const Case cases[] = {
      // Filters bind tighter than + and ~.
      {"{{ 'a' + 'b' | upper }}{{ '[' + ' x ' | trim + ']' }}{{ ('a' + ' b ') | trim }}",
       "aB[x]a b"},
      // Each loop iteration is its own scope.
      {"{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}",
       "12121"},
      {"{% for m in messages %}{{ loop.index }}/{{ loop.length }}{% if loop.last %}L{% elif "
       "loop.first %}F{% else %}M{% endif %}{% endfor %}",
       "1/3F2/3M3/3L"},
      {"{{ messages[0]['role'] is defined }}{{ messages[0].nope is defined }}{{ nope is not "
       "defined }}{{ none is none }}{{ 'ss' in 'ass' }}{{ 'x' not in ['x'] }}{{ not false and 1 "
       "or 2 }}",
       "TrueFalseTrueTrueTrueFalse1"},
      {R"({{ '\n\t\'q\x41\u00e9' }}{{ "d\"q" }})",
       "\n\t'qA\xc3\xa9"
       "d\"q"},
      {"{{ messages | length }}{{ messages[-1].role }}{{ messages[1:] | length }}{{ 'abc'[::-1] "
       "}}{{ 7 // 2 }}{{ -7 % 3 }}",
       "3assistant2cba32"},
      {"{{ u ~ 'x' }}{{ u }}{{ u | trim }}{{ u | length }}{{ 'a' in u }}", "x0False"},
      {"{{ 'ab/think/no_think'.replace('/think', '').replace('/no_think', '').strip() }}", "ab"},
      {"{{ 1 if 0 }}|{{ 1 if 0 else 2 }}|{{ true }}{{ none }}", "|2|TrueNone"},
      {"{% for c in 'a\xc3\xa9' %}[{{ c }}]{% else %}empty{% endfor %}{% for x in [] %}x{% else "
       "%}E{% endfor %}",
       "[a][\xc3\xa9]E"},
      {"{% if add_generation_prompt %}G{% endif %}{{ pad_token }}{{ tools is none }}",
       "<SPECIAL_21>True"},
  };
  for (const Case& c : cases) EXPECT_EQ(RenderOk(c.src), c.want) << c.src;
}

TEST(SftChatTemplate, RuntimeErrors) {
  for (const char* src :
       {"{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}{% "
        "endif %}",
        "{{ u + 'x' }}", "{{ u.x }}", "{{ 1 < 'a' }}", "{{ 'a' + 1 }}", "{{ u in 'abc' }}",
        "{{ 'x' in none }}", "{% for x in 3 %}{% endfor %}", "{{ [1].append(2) }}",
        "{{ 'a' | tojson(indent=[]) }}", "{{ u | tojson }}",
        // A field number past any integer: Python's "Too many decimal digits", not a throw.
        "{{ '{99999999999999999999999}'.format(1) }}"}) {
    auto t = ChatTemplate::Parse(src);
    ASSERT_TRUE(t.ok()) << src << ": " << t.status().ToString();
    auto r = (*t)->Render(Msgs(), Ctx());
    EXPECT_FALSE(r.ok()) << src << " rendered " << (r.ok() ? *r : "");
  }
  auto t = ChatTemplate::Parse("{{ raise_exception('first must be user') }}");
  ASSERT_TRUE(t.ok());
  auto r = (*t)->Render(Msgs(), Ctx());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("first must be user"), std::string::npos);
}

TEST(SftChatTemplate, RefusesWhatItDoesNotCover) {
  for (const char* src :
       {"{% include 'a' %}", "{% extends 'a' %}", "{% if x %}", "{{ x", "{# x", "{% endif %}",
        "{{ x | batch(2) }}", "{{ x | nosuch }}", "{{ x is nosuch }}", "{% do x %}",
        "{% for x in y recursive %}{% endfor %}", "{{ 9223372036854775808 }}",
        "{% with a = 1 %}{% endwith %}", "{{ (1, 2)[0:1, 2] }}", "{{ f(*a) }}"}) {
    auto t = ChatTemplate::Parse(src);
    EXPECT_FALSE(t.ok()) << src;
    if (!t.ok()) {
      EXPECT_NE(t.status().message().find("at line 1, column "), std::string::npos)
          << t.status().ToString();
    }
  }
}

// The holdout's template B (README): <s> once, then per message '[' role ']' strip(content)
// <SPECIAL_21>. Its source is not public; these are spellings it might have.
const char* const kTemplateB[] = {
    "{{ bos_token }}{% for message in messages %}{{ '[' + message['role'] + ']' + "
    "message['content'] | trim + '<SPECIAL_21>' }}{% endfor %}",
    "{{ bos_token }}\n{%- for message in messages %}\n    {{- '[' ~ message.role ~ ']' }}\n    {{- "
    "message.content.strip() }}\n    {{- '<SPECIAL_21>' }}\n{%- endfor %}\n",
    "{%- for message in messages -%}\n  {%- if loop.first -%}{{ bos_token }}{%- endif -%}\n  {%- "
    "set content = message['content'] | trim -%}\n  {{ '[' + message['role'] + ']' + content + "
    "'<SPECIAL_21>' }}\n{%- endfor -%}\n",
    "{% for message in messages %}\n{% if loop.index0 == 0 %}\n{{ bos_token }}\n{%- endif %}\n{{ "
    "'[' }}{{ message['role'] }}{{ ']' }}{{ message['content'].strip() }}{{ '<SPECIAL_21>' }}\n{%- "
    "endfor %}",
};
const char kTemplateBWant[] =
    "<s>[system]Be brief.<SPECIAL_21>[user]Hi<SPECIAL_21>[assistant]Hello /think<SPECIAL_21>";

TEST(SftChatTemplate, TemplateBSpellings) {
  for (const char* src : kTemplateB) EXPECT_EQ(RenderOk(src), kTemplateBWant) << src;
}

// Template B through format `default` on a tokenizer like the holdout's chat_b.
TEST(SftChatTemplate, TemplateBThroughDefaultFormat) {
  auto j = nlohmann::json::parse(ReadFile(kGolden + "/tokenizers/chat/gf_tokenizer.json"));
  j["pad_token"] = "<SPECIAL_21>";
  for (const char* src : kTemplateB) {
    j["chat_template"] = src;
    auto tok = text::ParseGfTokenizerJson(j.dump(), "chat_b");
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    auto fmt = ChatFormatter::Make(PromptFormat::kDefault, **tok);
    ASSERT_TRUE(fmt.ok()) << fmt.status().ToString();
    EXPECT_EQ((*fmt)->pad_id(), 21);
    std::vector<int64_t> tokens, targets;
    ASSERT_TRUE((*fmt)->Tokenize(Msgs(), "t", &tokens, &targets).ok());
    auto want = (*tok)->Encode(kTemplateBWant);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(tokens, *want);
    EXPECT_EQ(targets, tokens);  // default masks nothing
    EXPECT_EQ(tokens.front(), 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Rows, the cut, formats and Megatron's errors.

TEST(SftConversation, ParseRowErrorsNameTheRow) {
  for (const char* line : {"{\"messages\": [", "[]", "{\"msgs\": []}", "{\"messages\": [1]}",
                           "{\"messages\": [{\"content\": \"x\"}]}",
                           "{\"messages\": [{\"role\": 3, \"content\": \"x\"}]}"}) {
    auto r = ParseRow(line, "data.jsonl row 12");
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_NE(r.status().message().find("data.jsonl row 12"), std::string::npos);
  }
  auto ok = ParseRow(R"({"messages": [{"role": "user", "content": "h\u00e9"}], "x": 1})", "r");
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].content, "h\xc3\xa9");
}

// Issue 51 item 1: the template sees every key of each message object (nested values too) and
// the row's tools, as Megatron hands them to apply_chat_template.
TEST(SftConversation, TemplatesSeeWholeMessageObjects) {
  auto row = ParseRow(
      R"({"messages": [{"role": "user", "content": "Hi", "name": "bob"},)"
      R"( {"role": "assistant", "content": "Yo", "reasoning_content": "think hard",)"
      R"(  "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": [true, null]}}}]},)"
      R"( {"role": "tool", "content": null}], "tools": [{"name": "f"}], "x": 1})",
      "r");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_EQ(row->size(), 3u);
  EXPECT_FALSE((*row)[2].content_is_string);
  auto t = ChatTemplate::Parse(
      "{% for m in messages %}{{ m.content if m.content is string }}{% if m.reasoning_content "
      "%}<think>{{ m.reasoning_content }}</think>{% endif %}{% for c in m.tool_calls %}{{ "
      "c.function.arguments | tojson }}{% endfor %}{{ m.name }}{% endfor %}{{ tools | length }}"
      "{{ documents is none }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const auto convs = SplitConversations(*row);
  ASSERT_EQ(convs.size(), 1u);
  auto r = (*t)->Render(convs[0], ChatTemplateContext{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "HibobYo<think>think hard</think>{\"b\": 1, \"a\": [true, null]}1True");
  // The built-in formats need string contents and say so, naming the row and message.
  auto tok = LoadTok("chat");
  ASSERT_TRUE(tok);
  auto fmt = ChatFormatter::Make(PromptFormat::kIdentity, *tok);
  ASSERT_TRUE(fmt.ok());
  std::vector<int64_t> a, b;
  Status st = (*fmt)->Tokenize(convs[0], "rows.jsonl row 3", &a, &b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rows.jsonl row 3, message 2"), std::string::npos) << st.ToString();
}

TEST(SftConversation, SplitAtSystem) {
  const std::vector<Message> m = {{"user", "a"}, {"assistant", "b"},      {"system", "s"},
                                  {"user", "c"}, {"System", "not a cut"}, {"system", "t"}};
  const auto convs = SplitConversations(m);
  ASSERT_EQ(convs.size(), 3u);
  EXPECT_EQ(convs[0].size(), 2u);
  EXPECT_EQ(convs[1].size(), 3u);
  EXPECT_EQ(convs[2].size(), 1u);
  EXPECT_TRUE(SplitConversations({}).empty());
}

TEST(SftConversation, PromptFormatNames) {
  for (auto f : {PromptFormat::kNemotronHAligned, PromptFormat::kNemotronNanoV2,
                 PromptFormat::kIdentity, PromptFormat::kDefault}) {
    auto p = ParsePromptFormat(PromptFormatName(f));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, f);
  }
  EXPECT_FALSE(ParsePromptFormat("chatml").ok());
}

class SftTokenize : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = LoadTok("chat");
    ASSERT_TRUE(tok_);
  }
  Status Run(PromptFormat f, const Conversation& c, std::vector<int64_t>* tokens = nullptr,
             std::vector<int64_t>* targets = nullptr) {
    auto fmt = ChatFormatter::Make(f, *tok_);
    if (!fmt.ok()) return fmt.status();
    std::vector<int64_t> a, b;
    return (*fmt)->Tokenize(c, "rows.jsonl row 7", tokens ? tokens : &a, targets ? targets : &b);
  }
  std::vector<int64_t> Enc(const std::string& s) { return *tok_->Encode(s); }
  std::unique_ptr<text::TextTokenizer> tok_;
};

TEST_F(SftTokenize, Errors) {
  const PromptFormat formats[] = {PromptFormat::kNemotronHAligned, PromptFormat::kNemotronNanoV2,
                                  PromptFormat::kIdentity};
  for (PromptFormat f : formats) {
    SCOPED_TRACE(std::string(PromptFormatName(f)));
    for (const Conversation& c : std::vector<Conversation>{
             {{"user", "q"}, {"assistant", ""}},                       // empty assistant
             {{"user", "q"}, {"assistant", "a"}, {"assistant", "b"}},  // assistant after assistant
             {{"assistant", "a"}, {"system", "s"}},  // first message: the previous is the last
             {{"system", "s"}, {"assistant", "a"}},
             {{"user", "q"}, {"narrator", "x"}},  // unknown role
         }) {
      Status st = Run(f, c);
      ASSERT_FALSE(st.ok()) << c.back().role;
      EXPECT_NE(st.message().find("rows.jsonl row 7"), std::string::npos) << st.ToString();
    }
    // Python's conversation[-1]: an assistant first is fine when the last message is a user.
    EXPECT_TRUE(Run(f, {{"assistant", "a"}, {"user", "q"}}).ok());
    // Roles compare lower-cased for masking; a tool turn is masked.
    EXPECT_TRUE(
        Run(f, {{"User", "q"}, {"Assistant", "a"}, {"tool", "t"}, {"assistant", "b"}}).ok());
  }
  // A message whose tokens merge with its neighbour's: "<SPECIAL_1" + "1>" encodes as one id.
  Status st = Run(PromptFormat::kIdentity, {{"user", "<SPECIAL_1"}, {"assistant", "1>"}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rows.jsonl row 7"), std::string::npos);
}

TEST_F(SftTokenize, MasksAsTheTable) {
  std::vector<int64_t> tokens, targets;
  const Conversation c = {
      {"system", " S "}, {"user", " U/think "}, {"tool", "T"}, {"assistant", " A "}};
  ASSERT_TRUE(Run(PromptFormat::kNemotronNanoV2, c, &tokens, &targets).ok());
  const auto sys = Enc("<SPECIAL_10>System\nS\n"), user = Enc("<SPECIAL_11>User\nU\n"),
             asst = Enc("<SPECIAL_11>Assistant\nA\n<SPECIAL_12>\n");
  std::vector<int64_t> want = sys;
  want.insert(want.end(), user.begin(), user.end());
  want.insert(want.end(), asst.begin(), asst.end());
  EXPECT_EQ(tokens, want);
  std::vector<int64_t> want_t(sys.size() + user.size(), kIgnoreIndex);
  want_t.insert(want_t.end(), asst.begin(), asst.end());
  for (size_t k = 0; k < 3; ++k) want_t[sys.size() + user.size() + k] = kIgnoreIndex;
  EXPECT_EQ(targets, want_t);

  ASSERT_TRUE(Run(PromptFormat::kNemotronHAligned, c, &tokens, &targets).ok());
  want = Enc("<SPECIAL_10>System\nS\n<SPECIAL_11>User\nU/think\n<SPECIAL_11>Assistant\nA\n");
  EXPECT_EQ(tokens, want);
  const size_t prompt =
      Enc("<SPECIAL_10>System\nS\n<SPECIAL_11>User\nU/think\n<SPECIAL_11>Assistant\n").size();
  for (size_t k = 0; k < tokens.size(); ++k) {
    EXPECT_EQ(targets[k], k < prompt ? kIgnoreIndex : tokens[k]) << k;
  }

  ASSERT_TRUE(Run(PromptFormat::kIdentity, c, &tokens, &targets).ok());
  EXPECT_EQ(tokens, Enc(" S  U/think T A "));
  const size_t masked = Enc(" S  U/think T").size();
  for (size_t k = 0; k < tokens.size(); ++k) {
    EXPECT_EQ(targets[k], k < masked ? kIgnoreIndex : tokens[k]) << k;
  }
}

TEST_F(SftTokenize, PadIds) {
  EXPECT_EQ((*ChatFormatter::Make(PromptFormat::kNemotronHAligned, *tok_))->pad_id(), 233);
  EXPECT_EQ((*ChatFormatter::Make(PromptFormat::kNemotronNanoV2, *tok_))->pad_id(), 0);
  EXPECT_EQ((*ChatFormatter::Make(PromptFormat::kIdentity, *tok_))->pad_id(), 0);
  EXPECT_EQ((*ChatFormatter::Make(PromptFormat::kDefault, *tok_))->pad_id(), 2);  // no pad: eos
}

}  // namespace
}  // namespace gridfeed::order::sft
