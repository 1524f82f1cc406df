// The hand-written pre-tokenizer matchers (text/hf/known_patterns.h) against Oniguruma itself:
// the character classes per code point over all of Unicode, compared with what Oniguruma's
// regexes match, and the matchers' spans compared with Regex::FindMatches on generated texts
// (letters of many scripts, digits, whitespace kinds, punctuation, emoji, combining marks,
// contractions in case variants, random code points).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gridfeed/text/hf/known_patterns.h"
#include "gridfeed/text/hf/regex.h"

namespace gridfeed::text::hf {
namespace {

constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100k =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

void AppendUtf8(char32_t c, std::string* s) {
  if (c < 0x80) {
    s->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (c >> 6)));
    s->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    s->push_back(static_cast<char>(0xE0 | (c >> 12)));
    s->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xF0 | (c >> 18)));
    s->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

bool IsSurrogate(char32_t c) { return c >= 0xD800 && c < 0xE000; }

// Every code point (surrogates excepted) and the byte offset where each starts.
struct AllCodePoints {
  std::string text;
  std::vector<char32_t> at;  // code point starting at byte i, or 0xFFFFFFFF inside a character
  AllCodePoints() {
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (IsSurrogate(c)) continue;
      const size_t before = text.size();
      AppendUtf8(c, &text);
      at.resize(text.size(), 0xFFFFFFFF);
      at[before] = c;
    }
  }
};

// The code points a one-character regex matches, marked over all of Unicode.
std::vector<bool> OnigMatches(const AllCodePoints& all, std::string_view pattern) {
  auto re = Regex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status().message();
  std::vector<Span> spans;
  EXPECT_TRUE(re.value().FindAll(all.text, &spans).ok());
  std::vector<bool> hit(0x110000, false);
  for (const Span& s : spans) {
    EXPECT_NE(all.at[s.begin], 0xFFFFFFFF) << pattern << " matched inside a character";
    if (all.at[s.begin] != 0xFFFFFFFF) hit[all.at[s.begin]] = true;
  }
  return hit;
}

TEST(HfKnownPatterns, CharacterClassesAreOnigurumasForEveryCodePoint) {
  const AllCodePoints all;
  const auto space = OnigMatches(all, R"(\s)");
  const auto letter = OnigMatches(all, R"(\p{L})");
  const auto number = OnigMatches(all, R"(\p{N})");
  int mismatches = 0;
  size_t spaces = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (IsSurrogate(c)) continue;
    const unsigned char want =
        (space[c] ? kOnigSpace : 0) | (letter[c] ? kOnigLetter : 0) | (number[c] ? kOnigNumber : 0);
    spaces += space[c];
    if (OnigClassOf(c) != want && ++mismatches <= 10) {
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << ": class "
                    << int{OnigClassOf(c)} << ", Oniguruma says " << int{want};
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GE(spaces, 20u);  // \t..\r, ' ', U+0085, U+00A0, U+1680, U+2000.., U+3000...
  EXPECT_TRUE(letter[U'ß'] && letter[U'日'] && number[U'٣'] && number[U'½'] && space[0x3000]);

  for (char x : std::string_view("strevmld")) {
    const auto folds = OnigMatches(all, "(?i:" + std::string(1, x) + ")");
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (IsSurrogate(c)) continue;
      const bool ours = OnigFoldedContractionLetter(c) == x;
      EXPECT_EQ(ours, static_cast<bool>(folds[c]))
          << "(?i:" << x << ") on U+" << std::hex << static_cast<uint32_t>(c);
    }
  }
  EXPECT_EQ(OnigFoldedContractionLetter(0x17F), 's');  // LATIN SMALL LETTER LONG S
  EXPECT_EQ(OnigFoldedContractionLetter(U'S'), 's');
}

TEST(HfKnownPatterns, IdentifiesOnlyTheExactPatterns) {
  EXPECT_EQ(IdentifyKnownPattern(kGpt2), KnownPattern::kGpt2);
  EXPECT_EQ(IdentifyKnownPattern(kCl100k), KnownPattern::kCl100k);
  EXPECT_EQ(IdentifyKnownPattern(kQwen2), KnownPattern::kQwen2);
  std::string near(kCl100k);
  near.replace(near.find("{1,3}"), 5, "{1,2}");
  EXPECT_EQ(IdentifyKnownPattern(near), KnownPattern::kNone);
  EXPECT_EQ(IdentifyKnownPattern(std::string(kGpt2) + " "), KnownPattern::kNone);
  EXPECT_EQ(IdentifyKnownPattern(EscapeRegex(kGpt2)), KnownPattern::kNone);
  EXPECT_EQ(IdentifyKnownPattern(""), KnownPattern::kNone);
}

std::vector<std::string> Atoms() {
  std::vector<std::string> a = {" ",
                                "  ",
                                "   ",
                                "\t",
                                "\n",
                                "\n\n",
                                "\r\n",
                                "\r",
                                "\r\r\n ",
                                " \n ",
                                "\u000b",
                                "\u000c",
                                "\u0085",
                                "\u00a0",
                                "\u1680",
                                "\u2000",
                                "\u200a",
                                "\u2028",
                                "\u2029",
                                "\u202f",
                                "\u205f",
                                "\u3000",
                                "\u180e",
                                "\u200b",
                                "\ufeff",
                                "\x1c",
                                "\x1f",
                                std::string(1, '\0'),
                                "\x01",
                                "a",
                                "Z",
                                "hello",
                                "World",
                                "the",
                                "ſ",
                                "é",
                                "e\u0301",
                                "\u0301",
                                "\u0308\u0301",
                                "ß",
                                "İ",
                                "ı",
                                "Σ",
                                "ǅ",
                                "ǈ",
                                "K",
                                "日本語",
                                "中",
                                "こんにちは",
                                "ｶﾀｶﾅ",
                                "한국어",
                                "\u1100\u1161",
                                "ไทย",
                                "عربي",
                                "हिन्दी",
                                "Ελληνικά",
                                "привет",
                                "שלום",
                                "ა",
                                "ᐊ",
                                "𝐀",
                                "𐐀",
                                "0",
                                "1",
                                "12",
                                "123",
                                "1234",
                                "12345678901234567890",
                                "3.14",
                                "٣",
                                "٤٥",
                                "²",
                                "½",
                                "Ⅻ",
                                "〇",
                                "१२३",
                                "𝟘",
                                "①",
                                ".",
                                ",",
                                "!?",
                                "--",
                                "...",
                                "$",
                                "_",
                                "@",
                                "(",
                                ")",
                                "{",
                                "}",
                                "\"",
                                "#",
                                "<",
                                ">",
                                "|",
                                "</",
                                "~",
                                "\\",
                                "/",
                                "*",
                                "、",
                                "。",
                                "「",
                                "¿",
                                "«",
                                "—",
                                "👍",
                                "👨‍👩‍👧",
                                "🇫🇷",
                                "1️⃣",
                                "👍🏽",
                                "\ue000",
                                "\U000e0041",
                                "\ufdd0",
                                "\U0010ffff",
                                "＄",
                                "ｆｕｌｌ",
                                "ﬁ",
                                "ﬅ",
                                "™",
                                "\u00ad",
                                "\u0600",
                                "▁",
                                "Ġ",
                                "Ċ",
                                "\x7f",
                                "'",
                                "''",
                                "'s",
                                "'S",
                                "'ſ",
                                "'t",
                                "'T",
                                "'re",
                                "'RE",
                                "'Re",
                                "'rE",
                                "'ve",
                                "'VE",
                                "'vE",
                                "'m",
                                "'M",
                                "'ll",
                                "'LL",
                                "'lL",
                                "'Ll",
                                "'d",
                                "'D",
                                "'x",
                                "'ſt",
                                "'ﬅ",
                                "'K",
                                "'\u212a",
                                "' s",
                                "'\ns",
                                "n't",
                                "I'M",
                                "we'LL",
                                "'é",
                                "'1",
                                "'\u0301",
                                "def f(x):\n    return x",
                                "    ",
                                "\t\t",
                                "SELECT * FROM t;",
                                "<|endoftext|>"};
  return a;
}

std::string RandomText(std::mt19937_64& rng, const std::vector<std::string>& atoms) {
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 24);
  for (int i = 0; i < n; ++i) {
    if (rng() % 8 == 0) {  // any code point of Unicode
      char32_t c;
      do {
        c = static_cast<char32_t>(rng() % 0x110000);
      } while (IsSurrogate(c));
      AppendUtf8(c, &s);
    } else {
      s += atoms[rng() % atoms.size()];
    }
  }
  return s;
}

std::string Show(const std::string& text, const std::vector<Span>& spans) {
  std::string out;
  for (const Span& s : spans) {
    out += "[" + text.substr(s.begin, s.end - s.begin) + (s.is_match ? "]" : "]~");
  }
  return out;
}

// How many generated texts `kind` cuts otherwise than Oniguruma's `pattern` (the first few
// reported when `report`).
int CountDifferences(std::string_view pattern, KnownPattern kind, int texts, bool report) {
  auto re = Regex::Compile(pattern);
  EXPECT_TRUE(re.ok());
  const auto atoms = Atoms();
  std::vector<std::string> cases = {
      "",    " ",        "\n",      "a",   "'",       "'s",      " 's",
      "  a", "\r\n\r\n", " \n\t x", "a  ", "1234567", " !!\n\n", "x\u00a0\u00a0y"};
  for (const auto& a : atoms) {
    cases.push_back(a);
    cases.push_back(" " + a);
    cases.push_back(a + " x");
  }
  std::mt19937_64 rng(20240611 + static_cast<int>(kind));
  while (static_cast<int>(cases.size()) < texts) cases.push_back(RandomText(rng, atoms));
  std::vector<Span> want, got;
  int failures = 0;
  for (const std::string& text : cases) {
    EXPECT_TRUE(re.value().FindMatches(text, &want).ok());
    KnownFindMatches(kind, text, &got);
    bool same = want.size() == got.size();
    for (size_t i = 0; same && i < want.size(); ++i) {
      same = want[i].begin == got[i].begin && want[i].end == got[i].end &&
             want[i].is_match == got[i].is_match;
    }
    if (!same && ++failures <= 5 && report) {
      ADD_FAILURE() << "text '" << text << "'\n  Oniguruma " << Show(text, want) << "\n  ours      "
                    << Show(text, got);
    }
  }
  return failures;
}

TEST(HfKnownPatterns, Gpt2MatchesOniguruma) {
  EXPECT_EQ(CountDifferences(kGpt2, KnownPattern::kGpt2, 30000, true), 0);
}
TEST(HfKnownPatterns, Cl100kMatchesOniguruma) {
  EXPECT_EQ(CountDifferences(kCl100k, KnownPattern::kCl100k, 30000, true), 0);
}
TEST(HfKnownPatterns, Qwen2MatchesOniguruma) {
  EXPECT_EQ(CountDifferences(kQwen2, KnownPattern::kQwen2, 30000, true), 0);
}
// The comparison sees a difference as small as \p{N} against \p{N}{1,3}.
TEST(HfKnownPatterns, TheComparisonSeesSmallDifferences) {
  EXPECT_GT(CountDifferences(kCl100k, KnownPattern::kQwen2, 3000, false), 0);
  EXPECT_GT(CountDifferences(kQwen2, KnownPattern::kCl100k, 3000, false), 0);
  EXPECT_GT(CountDifferences(kCl100k, KnownPattern::kGpt2, 3000, false), 0);
}

}  // namespace
}  // namespace gridfeed::text::hf
