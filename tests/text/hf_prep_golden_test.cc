// tests/golden/hf-tokenizers: every prep run of its manifest through RunPrep, compared with the
// expected ids and byte for byte with Megatron's own .bin/.idx; and the decode cases.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "gridfeed/io/file_util.h"
#include "gridfeed/text/hf/hf_tokenizer.h"
#include "gridfeed/text/prep.h"
#include "gridfeed/text/text_tokenizer.h"
#include "testing/paths.h"

namespace gridfeed::text {
namespace {

using nlohmann::json;

std::string HfGoldenDir() { return testing::GoldenDir() + "/../hf-tokenizers"; }

json ReadJson(const std::string& path) {
  auto text = io::ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  return json::parse(text.value());
}

std::string Bytes(const std::string& path) {
  auto text = io::ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path << ": " << text.status().message();
  return text.ok() ? text.value() : std::string();
}

// The tokens of a .bin, widened.
std::vector<int64_t> BinTokens(const std::string& bin, const std::string& dtype) {
  std::vector<int64_t> out;
  if (dtype == "uint16") {
    for (size_t i = 0; i + 1 < bin.size(); i += 2) {
      out.push_back(static_cast<unsigned char>(bin[i]) |
                    (static_cast<unsigned char>(bin[i + 1]) << 8));
    }
  } else {
    for (size_t i = 0; i + 3 < bin.size(); i += 4) {
      uint32_t v = 0;
      for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(bin[i + k]);
      out.push_back(static_cast<int32_t>(v));
    }
  }
  return out;
}

TEST(HfPrepGolden, EveryManifestRunMatchesMegatronBytes) {
  const std::string set = HfGoldenDir();
  const json manifest = ReadJson(set + "/prep/manifest.json");
  ASSERT_EQ(manifest["runs"].size(), 12u);
  int exact = 0;
  for (const json& run : manifest["runs"]) {
    const std::string name = run["expected"].get<std::string>();
    SCOPED_TRACE(name);
    // Per process: other test runs may use the scratch root at the same time.
    const std::string dir = testing::ScratchDir("hf_prep_golden_" + std::to_string(::getpid()));
    PrepOptions o;
    o.input = set + "/" + run["input"].get<std::string>();
    o.output_prefix = dir + "/p";
    o.tokenizer_model = set + "/" + run["tokenizer"].get<std::string>();
    o.append_eod = run["append_eod"].get<bool>();
    o.workers = 2;
    auto stats = RunPrep(o);
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    const json expected = ReadJson(set + "/" + name);
    const std::string dtype = expected["dtype"].get<std::string>();
    EXPECT_EQ(io::DTypeName(stats.value().dtype), dtype);
    EXPECT_EQ(stats.value().documents, static_cast<int64_t>(expected["documents"].size()));
    std::vector<int64_t> want;
    for (const json& doc : expected["documents"]) {
      for (const json& id : doc) want.push_back(id.get<int64_t>());
    }
    const std::string bin = Bytes(o.output_prefix + ".bin");
    EXPECT_EQ(BinTokens(bin, dtype), want);
    const std::string megatron = set + "/" + run["megatron_prefix"].get<std::string>();
    const bool same_bin = bin == Bytes(megatron + ".bin");
    const bool same_idx = Bytes(o.output_prefix + ".idx") == Bytes(megatron + ".idx");
    EXPECT_TRUE(same_bin);
    EXPECT_TRUE(same_idx);
    if (same_bin && same_idx) ++exact;
  }
  std::printf("hf-tokenizers prep: %d/12 exact\n", exact);
}

// Megatron reads the JSONL in Python's text mode: a lone '\r' ends a line too. gpt2 ids of "a"
// and "b" (the library): 64, 65.
TEST(HfPrepGolden, LoneCarriageReturnEndsALine) {
  const std::string dir = testing::ScratchDir("hf_prep_cr_" + std::to_string(::getpid()));
  ASSERT_TRUE(
      io::WriteStringToFile(dir + "/in.jsonl", "{\"text\": \"a\"}\r{\"text\": \"b\"}\r\n").ok());
  PrepOptions o;
  o.input = dir + "/in.jsonl";
  o.output_prefix = dir + "/p";
  o.tokenizer_model = HfGoldenDir() + "/tokenizers/gpt2";
  auto stats = RunPrep(o);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats.value().documents, 2);
  EXPECT_EQ(BinTokens(Bytes(o.output_prefix + ".bin"), "uint16"), (std::vector<int64_t>{64, 65}));
}

TEST(HfDecodeGolden, MegatronIdsToTextAndReencode) {
  const std::string set = HfGoldenDir();
  for (const char* family : {"gpt2", "phi3", "olmo2-dolma2"}) {
    SCOPED_TRACE(family);
    const json d = ReadJson(set + "/decode/" + family + ".json");
    auto tok = LoadTextTokenizer(set + "/" + d["tokenizer"].get<std::string>());
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    const TextTokenizer& t = *tok.value();
    EXPECT_EQ(t.kind(), "huggingface");
    std::vector<std::string> specials;
    for (const auto& s : t.special_tokens()) specials.push_back(s.name);
    std::vector<std::string> want_specials;
    for (const json& s : d["all_special_tokens"]) want_specials.push_back(s.get<std::string>());
    EXPECT_EQ(specials, want_specials);
    for (const json& c : d["cases"]) {
      const std::vector<int64_t> ids = c["ids"].get<std::vector<int64_t>>();
      SCOPED_TRACE(c["ids"].dump());
      auto removed = t.Decode(ids);
      ASSERT_TRUE(removed.ok()) << removed.status().message();
      EXPECT_EQ(removed.value(), c["megatron_ids_to_text_remove_special"].get<std::string>());
      auto kept = hf::DecodeKeepingSpecials(t, ids);
      ASSERT_TRUE(kept.ok()) << kept.status().message();
      EXPECT_EQ(kept.value(), c["megatron_ids_to_text"].get<std::string>());
      // None of these families' post-processors adds a token, so Encode is the re-encode.
      auto again = t.Encode(c["decode_skip_special"].get<std::string>());
      ASSERT_TRUE(again.ok()) << again.status().message();
      EXPECT_EQ(again.value(), c["reencode_no_special"].get<std::vector<int64_t>>());
    }
  }
}

TEST(HfTokenizerLoad, LenAndSpecialIdsOfTheGoldenFamilies) {
  const std::string set = HfGoldenDir();
  struct Want {
    const char* family;
    int64_t len;
    int64_t eos;
  };
  // len(tokenizer) from the README's table; eos ids from the expected files' eod_id.
  for (const Want& w : {Want{"gpt2", 50257, 50256}, Want{"phi3", 32011, 32000},
                        Want{"olmo2-dolma2", 100278, 100257}}) {
    SCOPED_TRACE(w.family);
    auto tok = LoadTextTokenizer(set + "/tokenizers/" + w.family);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    EXPECT_EQ(tok.value()->vocab_size(), w.len);
    EXPECT_EQ(tok.value()->eos_id(), w.eos);
    // The file itself also loads.
    auto file = LoadTextTokenizer(set + "/tokenizers/" + w.family + "/tokenizer.json");
    ASSERT_TRUE(file.ok()) << file.status().message();
    EXPECT_EQ(file.value()->vocab_size(), w.len);
  }
}

}  // namespace
}  // namespace gridfeed::text
