// The tokenizer layer against the golden sets' recorded outputs: megatron-sft/tokenized (what
// Megatron's SFTTokenizer returned per conversation) and megatron-fim (the ids, special lists and
// case.json facts, and the FIM items and random draws, whose randint bounds count the code points
// of each decoded segment and whose tokens are the re-encoded pieces).
#include "gridfeed/text/text_tokenizer.h"

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/text/prep.h"
#include "gridfeed/text/prep_tokenizer.h"
#include "testing/paths.h"

namespace gridfeed::text {
namespace {

using io::IndexedDataset;
using io::ReadFileToString;
using io::ReadNpy;
using io::WriteStringToFile;

using gridfeed::testing::GoldenDir;
using gridfeed::testing::ScratchDir;
using nlohmann::json;

std::string SftDir() { return GoldenDir() + "/../megatron-sft"; }
std::string FimDir() { return GoldenDir() + "/../megatron-fim"; }
std::string ChatTok() { return SftDir() + "/tokenizers/chat"; }

json ReadJson(const std::string& path) { return json::parse(ReadFileToString(path).value()); }
std::vector<int64_t> Npy(const std::string& path) {
  auto a = ReadNpy(path);
  EXPECT_TRUE(a.ok()) << path;
  return a.ok() ? a->ToInt64() : std::vector<int64_t>{};
}

std::unique_ptr<TextTokenizer> Load(const std::string& path, TextTokenizerOptions o = {}) {
  auto t = LoadTextTokenizer(path, o);
  EXPECT_TRUE(t.ok()) << path << ": " << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

// ---- SFT: rendering the prompt formats of the README (test scaffolding, not under test) ----

// Python's str.isspace() code points.
bool PyIsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}
std::string PyStrip(const std::string& s) {
  auto cps = DecodeUtf8(s).value();
  size_t b = 0, e = cps.size();
  while (b < e && PyIsSpace(cps[b])) ++b;
  while (e > b && PyIsSpace(cps[e - 1])) --e;
  std::string out;
  AppendUtf8(std::span<const char32_t>(cps).subspan(b, e - b), &out);
  return out;
}

using Conversation = std::vector<std::pair<std::string, std::string>>;  // (role, content)

// Rows split at every message whose role is exactly "system".
std::vector<Conversation> Conversations(const std::string& jsonl) {
  std::vector<Conversation> out;
  std::istringstream in(ReadFileToString(jsonl).value());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json row = json::parse(line);
    bool started = false;
    for (const auto& m : row.at("messages")) {
      const std::string role = m.at("role"), content = m.at("content");
      if (!started || role == "system") out.emplace_back();
      started = true;
      out.back().emplace_back(role, content);
    }
  }
  return out;
}

std::string Render(const Conversation& c, const std::string& format) {
  std::string s;
  for (const auto& [role, content] : c) {
    if (format == "identity") {
      s += content;
    } else if (format == "default") {  // template A of tokenizer `chat`
      s += "<SPECIAL_20>" + role + "\n" + content + "</s>";
    } else if (format == "nemotron-h-aligned") {
      if (role == "system") s += "<SPECIAL_10>System\n" + PyStrip(content) + "\n";
      if (role == "user") {
        s += "<SPECIAL_11>User\n" + PyStrip(content) + "\n<SPECIAL_11>Assistant\n";
      }
      if (role == "assistant") s += PyStrip(content) + "\n";
    } else {
      ADD_FAILURE() << "format " << format;
    }
  }
  return s;
}

TEST(ChatBytesTokenizer, ContractFacts) {
  auto t = Load(ChatTok());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind(), "gf-chat-bytes-v1");
  EXPECT_EQ(t->vocab_size(), 512);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_EQ(t->unk_id(), 0);
  EXPECT_EQ(t->pad_id(), std::nullopt);
  EXPECT_EQ(t->TokenId("<SPECIAL_233>"), 233);  // nemotron-h-aligned's pad
  EXPECT_EQ(t->TokenId("<SPECIAL_256>"), std::nullopt);
  ASSERT_TRUE(t->chat_template());
  EXPECT_NE(t->chat_template()->find("<SPECIAL_20>"), std::string::npos);
  // bos, eos, unk first (Hugging Face's order), then every other named id.
  ASSERT_EQ(t->special_tokens().size(), 256u);
  EXPECT_EQ(t->special_tokens()[0], (NamedToken{"<s>", 1}));
  EXPECT_EQ(t->special_tokens()[1], (NamedToken{"</s>", 2}));
  EXPECT_EQ(t->special_tokens()[2], (NamedToken{"<unk>", 0}));
  EXPECT_EQ(t->special_tokens()[3], (NamedToken{"<SPECIAL_3>", 3}));
}

struct SftTokenized {
  std::string corpus, format;
};
class ChatBytesGolden : public ::testing::TestWithParam<SftTokenized> {};

// encode(render(conversation)) equals what Megatron's SFTTokenizer returned, conversation by
// conversation; the sft_b corpus holds literal special-token names in its texts.
TEST_P(ChatBytesGolden, EncodeMatchesMegatron) {
  const auto& p = GetParam();
  auto t = Load(ChatTok());
  ASSERT_TRUE(t);
  const std::string dir = SftDir() + "/tokenized/" + p.corpus + "__" + p.format + "__chat";
  const auto offsets = Npy(dir + "/offsets.npy");
  const auto tokens = Npy(dir + "/tokens.npy");
  const auto convs = Conversations(SftDir() + "/corpora/" + p.corpus + ".jsonl");
  ASSERT_EQ(convs.size() + 1, offsets.size());
  for (size_t c = 0; c < convs.size(); ++c) {
    const std::vector<int64_t> want(tokens.begin() + offsets[c], tokens.begin() + offsets[c + 1]);
    auto got = t->Encode(Render(convs[c], p.format));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, want) << p.corpus << " " << p.format << " conversation " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Sft, ChatBytesGolden,
                         ::testing::Values(SftTokenized{"sft_short", "identity"},
                                           SftTokenized{"sft_short", "default"},
                                           SftTokenized{"sft_short", "nemotron-h-aligned"},
                                           SftTokenized{"sft_b", "nemotron-h-aligned"}),
                         [](const auto& info) {
                           std::string n = info.param.corpus + "_" + info.param.format;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Decoding Megatron's ids gives the text back; specials (the template's) are dropped.
TEST(ChatBytesTokenizer, DecodeOfGoldenIds) {
  auto t = Load(ChatTok());
  ASSERT_TRUE(t);
  const auto convs = Conversations(SftDir() + "/corpora/sft_short.jsonl");
  for (const char* format : {"identity", "default"}) {
    const std::string dir = SftDir() + "/tokenized/sft_short__" + format + "__chat";
    const auto offsets = Npy(dir + "/offsets.npy");
    const auto tokens = Npy(dir + "/tokens.npy");
    ASSERT_EQ(convs.size() + 1, offsets.size());
    for (size_t c = 0; c < convs.size(); ++c) {
      std::string want;
      for (const auto& [role, content] : convs[c]) {
        want += std::string(format) == "identity" ? content : role + "\n" + content;
      }
      auto got = t->Decode(std::span(tokens).subspan(offsets[c], offsets[c + 1] - offsets[c]));
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, want) << format << " conversation " << c;
    }
  }
}

TEST(ChatBytesTokenizer, SpecialNamesInText) {
  auto t = Load(ChatTok());
  ASSERT_TRUE(t);
  auto ids = [&](std::string_view s) { return t->Encode(s).value(); };
  EXPECT_EQ(ids("<s>a</s>"), (std::vector<int64_t>{1, 256 + 'a', 2}));
  EXPECT_EQ(
      ids("<SPECIAL_233><SPECIAL_23"),
      (std::vector<int64_t>{233, 256 + '<', 256 + 'S', 256 + 'P', 256 + 'E', 256 + 'C', 256 + 'I',
                            256 + 'A', 256 + 'L', 256 + '_', 256 + '2', 256 + '3'}));
  EXPECT_EQ(ids("\xC3\xBC"), (std::vector<int64_t>{256 + 0xC3, 256 + 0xBC}));  // u-umlaut
  EXPECT_EQ(ids(""), std::vector<int64_t>{});
  // Decode drops every named id, keeps bytes.
  EXPECT_EQ(t->Decode(std::vector<int64_t>{1, 256 + 'h', 20, 256 + 'i', 2}).value(), "hi");
}

// The longest name starting at a position wins, whatever the file's order.
TEST(ChatBytesTokenizer, LongestNameWins) {
  json j = ReadJson(ChatTok() + "/gf_tokenizer.json");
  j["named_tokens"].erase("<SPECIAL_3>");
  j["named_tokens"].erase("<SPECIAL_4>");
  j["named_tokens"]["<ab"] = 3;
  j["named_tokens"]["<a"] = 4;
  auto t = ParseGfTokenizerJson(j.dump(), "mem.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->Encode("<ab<a<").value(), (std::vector<int64_t>{3, 4, 256 + '<'}));
}

TEST(TextTokenizer, InvalidUtf8NamesTheByte) {
  auto chat = Load(ChatTok());
  auto chars = Load(FimDir() + "/tokenizers/u16_pairs");
  ASSERT_TRUE(chat && chars);
  const std::pair<std::string, size_t> bad[] = {
      {"ab\xFF", 2},            // never a UTF-8 byte
      {"\xC0\x80", 0},          // overlong NUL
      {"x\xED\xA0\x80", 1},     // a surrogate
      {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
      {"xy\xE2\x82", 2},        // truncated
      {"\x80", 0},              // a lone continuation byte
  };
  for (const auto& [text, at] : bad) {
    for (const TextTokenizer* t : {chat.get(), chars.get()}) {
      auto r = t->Encode(text);
      ASSERT_FALSE(r.ok()) << t->kind();
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("at byte " + std::to_string(at)), std::string::npos)
          << r.status().message();
    }
  }
  // Bytes that decode to broken UTF-8 are refused too.
  auto d = chat->Decode(std::vector<int64_t>{256 + 'a', 256 + 0xC3});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("at byte 1"), std::string::npos) << d.status().message();
  auto range = chat->Decode(std::vector<int64_t>{256, 512});
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("position 1"), std::string::npos);
}

// ---- FIM: gf-charvocab-v1 ----

const char* kFimCases[] = {"i32_L64_split_frag", "u16_L128_pairs_bos_pad",
                           "u16_L256_noprefix_flags", "u16_L64_r05_spm05_1to1"};

TextTokenizerOptions FimOptions(const json& c) {
  TextTokenizerOptions o;
  for (const auto& n : c["inputs"]["special_tokens_arg"]) o.special_tokens.push_back(n);
  return o;
}

std::vector<char32_t> Cps(const json& list) {
  std::vector<char32_t> out;
  for (const auto& v : list) out.push_back(v.get<char32_t>());
  return out;
}

// vocab size, eod, pad, the special list in Megatron's order and the FIM token ids.
TEST(CharVocabTokenizer, CaseFacts) {
  for (const char* name : kFimCases) {
    SCOPED_TRACE(name);
    const json c = ReadJson(FimDir() + "/cases/" + name + "/case.json");
    auto t = Load(FimDir() + "/" + c["inputs"]["tokenizer_dir"].get<std::string>(), FimOptions(c));
    ASSERT_TRUE(t);
    const json& d = c["derived"];
    EXPECT_EQ(t->kind(), "gf-charvocab-v1");
    EXPECT_EQ(t->vocab_size(), d["tokenizer_vocab_size"].get<int64_t>());
    EXPECT_EQ(t->eos_id(), d["tokenizer_eod"].get<int64_t>());
    if (d["tokenizer_pad"].is_null()) {
      EXPECT_EQ(t->pad_id(), std::nullopt);
    } else {
      EXPECT_EQ(t->pad_id(), d["tokenizer_pad"].get<int64_t>());
    }
    std::vector<std::string> names;
    std::vector<int64_t> ids;
    for (const auto& s : t->special_tokens()) names.push_back(s.name), ids.push_back(s.id);
    EXPECT_EQ(names, d["all_special_tokens"].get<std::vector<std::string>>());
    EXPECT_EQ(ids, d["all_special_ids"].get<std::vector<int64_t>>());
    for (int64_t id : ids) EXPECT_TRUE(t->IsSpecial(id));
    EXPECT_FALSE(t->IsSpecial(1));
    for (const auto& mid : c["splits"]["train"]["mid"]) {
      for (const auto& [role, tok] : c["inputs"]["fim_extra_tokens"].items()) {
        EXPECT_EQ(t->TokenId(tok.get<std::string>()), mid["fim_token_ids"][role].get<int64_t>())
            << role;
      }
      if (!c["inputs"]["fim_split_sample"].is_null()) {
        const std::string split = c["inputs"]["fim_split_sample"];
        const int64_t id = mid["fim_split_sample_id"];
        EXPECT_EQ(t->TokenId(split), id);
        EXPECT_EQ(DecodeUtf8(split).value(), Cps(d["fim_split_sample_codepoints"]));
        EXPECT_EQ(DecodeUtf8(t->Decode(std::vector<int64_t>{id}).value()).value(),
                  Cps(d["fim_split_sample_codepoints"]));
      }
    }
    if (!c["inputs"]["fim_no_prefix"].is_null()) {  // README: the character of token id 1
      EXPECT_EQ(DecodeUtf8(t->Decode(std::vector<int64_t>{1}).value()).value(),
                Cps(d["fim_no_prefix_codepoints"]));
    }
  }
}

struct Trace {
  std::vector<json> calls;
  size_t next = 0;
  const json& Take(const char* what) {
    static const json none = json::array({"none"});
    if (next >= calls.size()) {
      ADD_FAILURE() << "no draw left for " << what;
      return none;
    }
    return calls[next++];
  }
};

// The FIM items of every case, rebuilt from the windows and the recorded draws with this
// tokenizer (the segmenting and splitting of the design doc's part B as scaffolding): every randint
// bound is len(decode(segment)) + 1 and the items' tokens are the re-encoded pieces (pairs
// re-merged, a BOS per piece where the tokenizer adds one). Everything compared is Megatron's
// output.
TEST(CharVocabTokenizer, FimItemsReencode) {
  for (const char* name : kFimCases) {
    SCOPED_TRACE(name);
    const std::string dir = FimDir() + "/cases/" + name;
    const json c = ReadJson(dir + "/case.json");
    auto t = Load(FimDir() + "/" + c["inputs"]["tokenizer_dir"].get<std::string>(), FimOptions(c));
    ASSERT_TRUE(t);
    const json& in = c["inputs"];
    const int64_t L = in["seq_length"];
    const double fim_rate = in["fim_rate"], spm_rate = in["fim_spm_rate"];
    const json& ids = c["splits"]["train"]["mid"][0]["fim_token_ids"];
    const int64_t pre = ids["prefix"], mid = ids["middle"], suf = ids["suffix"], fpad = ids["pad"],
                  eod = ids["eod"];
    const json& split_id = c["splits"]["train"]["mid"][0]["fim_split_sample_id"];
    const std::optional<int64_t> split =
        split_id.is_null() ? std::nullopt : std::optional<int64_t>(split_id.get<int64_t>());
    const double fragment_rate =
        in["fim_fragment_rate"].is_null() ? -1.0 : in["fim_fragment_rate"].get<double>();
    std::optional<std::vector<char32_t>> no_prefix;
    if (!in["fim_no_prefix"].is_null())
      no_prefix = DecodeUtf8(in["fim_no_prefix"].get<std::string>()).value();
    const auto windows = Npy(dir + "/train/items/window_before_fim.npy");
    const auto items = Npy(dir + "/train/items/tokens.npy");
    std::istringstream traces(ReadFileToString(dir + "/train/items/rng_trace.jsonl").value());
    const size_t K = items.size() / L;
    ASSERT_EQ(windows.size(), K * (L + 1));
    int permuted = 0;
    for (size_t k = 0; k < K; ++k) {
      std::string line;
      ASSERT_TRUE(std::getline(traces, line));
      Trace tr{json::parse(line)["rng_calls"].get<std::vector<json>>()};
      std::vector<int64_t> out;
      auto permute = [&](std::vector<int64_t> seg, double rate) {
        const json& b = tr.Take("binomial");
        ASSERT_EQ(b[0], "binomial");
        ASSERT_EQ(b[2].get<double>(), rate);
        if (b[3].get<int>() == 0) return out.insert(out.end(), seg.begin(), seg.end()), void();
        auto text = t->Decode(seg);
        ASSERT_TRUE(text.ok()) << text.status().ToString();
        const auto cps = DecodeUtf8(*text).value();
        if (no_prefix &&
            std::equal(no_prefix->begin(), no_prefix->end(), cps.begin(),
                       cps.begin() + std::min(cps.size(), no_prefix->size())) &&
            cps.size() >= no_prefix->size()) {
          return out.insert(out.end(), seg.begin(), seg.end()), void();
        }
        const json& r = tr.Take("randint");
        ASSERT_EQ(r[0], "randint");
        ASSERT_EQ(r[2].get<size_t>(), cps.size() + 1) << "fetch " << k;  // decoded length
        auto cut = r[3].get<std::vector<size_t>>();
        std::sort(cut.begin(), cut.end());
        auto piece = [&](size_t from, size_t to) {
          std::string s;
          AppendUtf8(std::span(cps).subspan(from, to - from), &s);
          auto e = t->Encode(s);
          EXPECT_TRUE(e.ok()) << e.status().ToString();
          return e.ok() ? *e : std::vector<int64_t>{};
        };
        const auto p = piece(0, cut[0]), m = piece(cut[0], cut[1]), s = piece(cut[1], cps.size());
        const json& spm = tr.Take("binomial");
        ASSERT_EQ(spm[2].get<double>(), spm_rate);
        auto add = [&](const std::vector<int64_t>& v) {
          out.insert(out.end(), v.begin(), v.end());
        };
        if (spm[3].get<int>() == 1) {
          add({pre, suf}), add(s), add({mid}), add(p), add(m);
        } else {
          add({pre}), add(p), add({suf}), add(s), add({mid}), add(m);
        }
        ++permuted;
      };
      // Split-and-permute: fragments between split tokens, a sample-level draw first.
      auto fsp = [&](std::vector<int64_t> seg) {
        if (!split || std::find(seg.begin(), seg.end(), *split) == seg.end()) {
          return permute(std::move(seg), fim_rate);
        }
        const json& b = tr.Take("binomial");
        ASSERT_EQ(b[2].get<double>(), fim_rate);
        if (b[3].get<int>() == 0) return out.insert(out.end(), seg.begin(), seg.end()), void();
        size_t s = 0;
        for (size_t i = 0; i < seg.size(); ++i) {
          if (seg[i] != *split) continue;
          if (i > s) {
            permute({seg.begin() + s, seg.begin() + i}, fragment_rate);
            out.push_back(*split);
          }
          s = i + 1;
        }
        permute({seg.begin() + s, seg.end()}, fragment_rate);
      };
      const std::vector<int64_t> w(windows.begin() + k * (L + 1),
                                   windows.begin() + (k + 1) * (L + 1));
      size_t s = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] != eod) continue;
        if (i > s) {
          fsp({w.begin() + s, w.begin() + i});
          out.push_back(eod);
        }
        s = i + 1;
      }
      fsp({w.begin() + s, w.end()});
      EXPECT_EQ(tr.next, tr.calls.size()) << "fetch " << k << ": draws left over";
      out.resize(L + 1, fpad);
      out.resize(L);
      if (t->pad_id()) std::replace(out.begin(), out.end(), *t->pad_id(), int64_t{0});
      EXPECT_EQ(out, std::vector<int64_t>(items.begin() + k * L, items.begin() + (k + 1) * L))
          << "fetch " << k;
    }
    EXPECT_GT(permuted, 0);
  }
}

// With one character per token, encode(decode(ids)) gives the plain ids back.
TEST(CharVocabTokenizer, OneToOneRoundTrip) {
  auto t = Load(FimDir() + "/tokenizers/u16_1to1");
  ASSERT_TRUE(t);
  const auto w = Npy(FimDir() + "/cases/u16_L64_r05_spm05_1to1/train/items/window_before_fim.npy");
  std::vector<int64_t> plain;
  for (int64_t id : w) {
    if (!t->IsSpecial(id)) plain.push_back(id);
  }
  ASSERT_GT(plain.size(), 1000u);
  EXPECT_EQ(t->Encode(t->Decode(w).value()).value(), plain);
}

// Pairs: the text survives decode -> encode -> decode, and encode picks pair tokens.
TEST(CharVocabTokenizer, PairsTextRoundTrip) {
  auto t = Load(FimDir() + "/tokenizers/u16_pairs_bos_pad");
  ASSERT_TRUE(t);
  const auto w = Npy(FimDir() + "/cases/u16_L128_pairs_bos_pad/train/items/window_before_fim.npy");
  const std::string text = t->Decode(w).value();
  const auto ids = t->Encode(text).value();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 49995);  // call_adds_bos: <s>
  EXPECT_EQ(t->Decode(ids).value(), text);
  EXPECT_LT(ids.size(), DecodeUtf8(text).value().size());  // some two-character tokens
  EXPECT_EQ(t->Encode("").value(), std::vector<int64_t>{49995});
  // A character outside the alphabet names its place.
  auto bad = t->Encode(
      "\xC4\x80"
      "a");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("U+0061 at code point 1"), std::string::npos)
      << bad.status().message();
}

// Named ids inside the plain range shift the ranks (worked out by hand from the contract):
// V 10, A 3, named 2 and 5 -> plain ids 0 1 3 4 6 7 8 9 = ranks 0..7; ranks 0..2 are U+0100..
// U+0102, rank 3 + 3a + b the pair (a, b).
TEST(CharVocabTokenizer, RanksAroundNamedIds) {
  const json j = {{"kind", "gf-charvocab-v1"}, {"vocab_size", 10},
                  {"alphabet_size", 3},        {"named_tokens", {{"<e>", 2}, {"<x>", 5}}},
                  {"eos_token", "<e>"},        {"pad_token", nullptr},
                  {"bos_token", nullptr},      {"call_adds_bos", false}};
  auto t = ParseGfTokenizerJson(j.dump(), "mem.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto enc = [&](std::string_view s) { return (*t)->Encode(s).value(); };
  EXPECT_EQ(enc("\u0100\u0100"), (std::vector<int64_t>{4}));     // pair (0, 0) = rank 3
  EXPECT_EQ(enc("\u0101\u0101"), (std::vector<int64_t>{9}));     // pair (1, 1) = rank 7
  EXPECT_EQ(enc("\u0102\u0100"), (std::vector<int64_t>{3, 0}));  // pair rank 9 > 7: singles
  EXPECT_EQ(enc("\u0100\u0102\u0101"), (std::vector<int64_t>{7, 1}));
  EXPECT_EQ((*t)->Decode(std::vector<int64_t>{2, 8, 5}).value(), "\u0101\u0100");
  EXPECT_EQ((*t)->TokenId("\u0101\u0100"), 8);
  EXPECT_EQ((*t)->TokenId("\u0102\u0102"), std::nullopt);
  EXPECT_EQ((*t)->eos_id(), 2);
  EXPECT_TRUE((*t)->IsSpecial(5));  // every named token is special
}

TEST(TextTokenizer, SharedAcrossThreads) {
  auto t = Load(FimDir() + "/tokenizers/i32_pairs");
  ASSERT_TRUE(t);
  std::string text;
  for (char32_t c = 0x100; c < 0x100 + 384; ++c) AppendUtf8(std::span(&c, 1), &text);
  const auto want = t->Encode(text).value();
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        if (t->Encode(text).value() != want || t->Decode(want).value() != text) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, 0);
}

// ---- SentencePiece: the wrapper against the SentencePiece library itself ----

TEST(SentencePieceTokenizer, WrapsTheLibrary) {
  const std::string dir = ScratchDir("sp_tokenizer");
  std::string corpus;
  for (int i = 0; i < 200; ++i) {
    corpus += "in the beginning god created the heaven and the earth " + std::to_string(i % 7) +
              "\nand the earth was without form and void\n";
  }
  ASSERT_TRUE(WriteStringToFile(dir + "/corpus.txt", corpus).ok());
  const auto st = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + dir + "/corpus.txt --model_prefix=" + dir +
      "/m --vocab_size=60 --model_type=bpe --pad_id=3 --minloglevel=2");
  ASSERT_TRUE(st.ok()) << st.ToString();
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(dir + "/m.model").ok());

  auto t = Load(dir + "/m.model");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind(), "sentencepiece");
  EXPECT_EQ(t->vocab_size(), sp.GetPieceSize());
  EXPECT_EQ(t->unk_id(), sp.unk_id());
  EXPECT_EQ(t->bos_id(), sp.bos_id());
  EXPECT_EQ(t->eos_id(), sp.eos_id());
  EXPECT_EQ(t->pad_id(), 3);
  EXPECT_EQ(t->TokenId("</s>"), sp.eos_id());
  EXPECT_EQ(t->TokenId("no-such-piece"), std::nullopt);
  ASSERT_EQ(t->special_tokens().size(), 4u);  // bos, eos, unk, pad
  EXPECT_EQ(t->special_tokens()[0].id, sp.bos_id());
  EXPECT_EQ(t->special_tokens()[3].id, 3);

  const std::string text = "the earth was void and god created 3";
  std::vector<int> want;
  ASSERT_TRUE(sp.Encode(text, &want).ok());
  const auto got = t->Encode(text).value();
  EXPECT_EQ(got, std::vector<int64_t>(want.begin(), want.end()));
  // Decode drops the special ids around the text.
  std::vector<int64_t> framed = {sp.bos_id()};
  framed.insert(framed.end(), got.begin(), got.end());
  framed.push_back(sp.eos_id());
  EXPECT_EQ(t->Decode(framed).value(), text);
  EXPECT_FALSE(t->Decode(std::vector<int64_t>{t->vocab_size()}).ok());
  EXPECT_FALSE(t->Encode("the \xFF").ok());
}

// ---- bad files ----

struct BadFile {
  std::string base;  // tokenizer folder under the golden root
  std::function<void(json&)> edit;
  std::string field;  // must appear in the message
};

TEST(TextTokenizer, BadFilesNameTheField) {
  const std::string chat = "megatron-sft/tokenizers/chat",
                    chars = "megatron-fim/tokenizers/u16_pairs";
  const BadFile cases[] = {
      {chat, [](json& j) { j["kind"] = "gf-bytes-v9"; }, "'kind'"},
      {chat, [](json& j) { j.erase("kind"); }, "'kind'"},
      {chat, [](json& j) { j["vocab_size"] = 511; }, "'vocab_size'"},
      {chat, [](json& j) { j["vocab_size"] = "512"; }, "'vocab_size'"},
      {chat,
       [](json& j) {
         j["named_tokens"].erase("<SPECIAL_3>");
         j["named_tokens"]["<x>"] = 300;
       },
       "'named_tokens.<x>'"},
      {chat,
       [](json& j) {
         j["named_tokens"].erase("<SPECIAL_3>");
         j["named_tokens"]["<x>"] = 5;
       },
       "repeats id 5"},
      {chat, [](json& j) { j["named_tokens"] = json::array(); }, "'named_tokens'"},
      {chat, [](json& j) { j["eos_token"] = "<eos>"; }, "'eos_token'"},
      {chat, [](json& j) { j["pad_token"] = 7; }, "'pad_token'"},
      {chat, [](json& j) { j["additional_special_tokens"] = {"<nope>"}; },
       "'additional_special_tokens'"},
      {chars, [](json& j) { j["vocab_size"] = 1ll << 40; }, "'vocab_size'"},
      {chars, [](json& j) { j["vocab_size"] = -1; }, "'vocab_size'"},
      {chars, [](json& j) { j["alphabet_size"] = 0; }, "'alphabet_size'"},
      {chars, [](json& j) { j["alphabet_size"] = 2000000; }, "'alphabet_size'"},
      {chars, [](json& j) { j["alphabet_size"] = 100; }, "'vocab_size'"},  // 100 + 100^2 < plain
      {chars, [](json& j) { j["eos_token"] = nullptr; }, "'eos_token'"},
      {chars, [](json& j) { j["call_adds_bos"] = true; }, "'call_adds_bos'"},
      {chars, [](json& j) { j["call_adds_bos"] = 1; }, "'call_adds_bos'"},
      {chars, [](json& j) { j["named_tokens"]["<x>"] = 50000; }, "'named_tokens.<x>'"},
      {chars, [](json& j) { j["named_tokens"][""] = 7; }, "'named_tokens.'"},
  };
  for (const auto& c : cases) {
    json j = ReadJson(GoldenDir() + "/../" + c.base + "/gf_tokenizer.json");
    c.edit(j);
    const std::string dir = ScratchDir("bad_tokenizer");
    ASSERT_TRUE(WriteStringToFile(dir + "/gf_tokenizer.json", j.dump()).ok());
    auto t = LoadTextTokenizer(dir);
    ASSERT_FALSE(t.ok()) << j.dump().substr(0, 200);
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.field), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(dir + "/gf_tokenizer.json"), std::string::npos)
        << t.status().message();
  }
}

TEST(TextTokenizer, LoadingByPath) {
  // A folder and the file itself.
  ASSERT_TRUE(Load(ChatTok()));
  ASSERT_TRUE(Load(ChatTok() + "/gf_tokenizer.json"));
  const std::string dir = ScratchDir("tokenizer_paths");
  EXPECT_EQ(LoadTextTokenizer(dir + "/absent").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadTextTokenizer(dir).status().code(), StatusCode::kNotFound);  // no json inside
  ASSERT_TRUE(WriteStringToFile(dir + "/broken.json", "{\"kind\": ").ok());
  auto broken = LoadTextTokenizer(dir + "/broken.json");
  EXPECT_NE(broken.status().message().find("not valid JSON"), std::string::npos);
  // Anything not starting with '{' is taken for a SentencePiece model.
  ASSERT_TRUE(WriteStringToFile(dir + "/junk.model", "\x0a\x05junk").ok());
  auto junk = LoadTextTokenizer(dir + "/junk.model");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("SentencePiece"), std::string::npos);
  // An empty (or blank) gf_tokenizer.json is said to be one, not a SentencePiece model that
  // failed to load (issue 51 item 10); so is an empty file of any name.
  const std::string empty_dir = dir + "/empty";
  std::filesystem::create_directories(empty_dir);
  for (const std::string& text : {std::string(), std::string(" \n")}) {
    ASSERT_TRUE(WriteStringToFile(empty_dir + "/gf_tokenizer.json", text).ok());
    auto empty = LoadTextTokenizer(empty_dir);
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(empty.status().message().find("SentencePiece"), std::string::npos)
        << empty.status().message();
    EXPECT_NE(empty.status().message().find(empty_dir + "/gf_tokenizer.json"), std::string::npos)
        << empty.status().message();
  }
  ASSERT_TRUE(WriteStringToFile(dir + "/empty.model", "").ok());
  auto empty_model = LoadTextTokenizer(dir + "/empty.model");
  ASSERT_FALSE(empty_model.ok());
  EXPECT_NE(empty_model.status().message().find("is empty"), std::string::npos)
      << empty_model.status().message();
  // --special-tokens must name tokens the file has.
  TextTokenizerOptions o;
  o.special_tokens = {"<fim_prefix>"};
  auto added = LoadTextTokenizer(ChatTok(), o);
  ASSERT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("'<fim_prefix>'"), std::string::npos);
  o.special_tokens = {"<SPECIAL_9>"};
  auto t = Load(ChatTok(), o);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->special_tokens()[3], (NamedToken{"<SPECIAL_9>", 9}));
}

// gridfeed prep with a gf_tokenizer.json: one document per conversation of sft_short rendered
// in format identity gives Megatron's token ids (and the folder works like the file).
TEST(PrepWithGfTokenizer, MatchesMegatronTokens) {
  const auto convs = Conversations(SftDir() + "/corpora/sft_short.jsonl");
  const std::string gdir = SftDir() + "/tokenized/sft_short__identity__chat";
  const auto offsets = Npy(gdir + "/offsets.npy");
  const auto tokens = Npy(gdir + "/tokens.npy");
  const std::string dir = ScratchDir("prep_gf_tokenizer");
  std::string jsonl;
  std::vector<size_t> kept;  // conversations that encode to something
  for (size_t c = 0; c < convs.size(); ++c) {
    jsonl += json{{"text", Render(convs[c], "identity")}}.dump() + "\n";
    if (offsets[c + 1] > offsets[c]) kept.push_back(c);
  }
  ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl", jsonl).ok());
  for (const std::string& model : {ChatTok(), ChatTok() + "/gf_tokenizer.json"}) {
    PrepOptions o;
    o.input = dir + "/in.jsonl";
    o.output_prefix = dir + "/out";
    o.tokenizer_model = model;
    o.append_eod = true;  // the tokenizer's EOS, </s> = 2
    o.workers = 2;
    auto stats = RunPrep(o);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    auto ds = IndexedDataset::Open(o.output_prefix).value();
    ASSERT_EQ(ds.num_sequences(), static_cast<int64_t>(kept.size()));
    for (size_t s = 0; s < kept.size(); ++s) {
      std::vector<int64_t> want(tokens.begin() + offsets[kept[s]],
                                tokens.begin() + offsets[kept[s] + 1]);
      want.push_back(2);
      auto span = ds.Get(static_cast<int64_t>(s)).value();
      std::vector<int64_t> got;
      for (int64_t i = 0; i < span.length_tokens; ++i) got.push_back(span[i]);
      EXPECT_EQ(got, want) << model << " sequence " << s;
    }
  }
}

}  // namespace
}  // namespace gridfeed::text
