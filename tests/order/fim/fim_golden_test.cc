// The FIM transform and its random draws against every item of the golden FIM set
// (GRIDFEED_FIM_GOLDEN_DIR; the environment variable of that name, when set, replaces the
// compiled-in folder, so a hidden set in the same layout runs too): starting from the items'
// window_before_fim in fetch order, with one fresh stream per mid-level dataset, every call on
// the stream must be the recorded one (rng_trace.jsonl), and the GPT fields assembled from the
// result must be the items' tokens, labels, loss_mask (without the cache leak) and position_ids.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/text/text_tokenizer.h"
#include "gridfeed/order/fim/fim_random.h"
#include "gridfeed/order/fim/fim_transform.h"
#include "gridfeed/order/sample_fields.h"

namespace gridfeed::order::fim {
namespace {

namespace fs = std::filesystem;

fs::path GoldenDir() {
  const char* env = std::getenv("GRIDFEED_FIM_GOLDEN_DIR");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(GRIDFEED_FIM_GOLDEN_DIR);
}

nlohmann::json ReadJson(const fs::path& p) {
  auto text = io::ReadFileToString(p.string());
  EXPECT_TRUE(text.ok()) << p;
  return nlohmann::json::parse(text.ok() ? *text : "null");
}

std::vector<FimDraw> RecordedDraws(const nlohmann::json& calls) {
  std::vector<FimDraw> out;
  for (const auto& c : calls) {
    FimDraw d;
    if (c[0] == "binomial") {
      EXPECT_EQ(c[1].get<int>(), 1);
      d.kind = FimDraw::kBinomial;
      d.p = c[2].get<double>();
      d.values = {c[3].get<int64_t>(), 0};
    } else {
      EXPECT_EQ(c[0], "randint");
      EXPECT_EQ(c[1].get<int>(), 0);
      d.kind = FimDraw::kRandint;
      d.high = c[2].get<int64_t>();
      d.values = {c[3][0].get<int64_t>(), c[3][1].get<int64_t>()};
    }
    out.push_back(d);
  }
  return out;
}

std::string Describe(const std::vector<FimDraw>& v) {
  std::string s;
  for (const auto& d : v) {
    s += d.kind == FimDraw::kBinomial
             ? "binomial(" + std::to_string(d.p) + ")=" + std::to_string(d.values[0]) + " "
             : "randint(" + std::to_string(d.high) + ")=[" + std::to_string(d.values[0]) + "," +
                   std::to_string(d.values[1]) + "] ";
  }
  return s;
}

std::vector<std::string> Cases() {
  std::vector<std::string> out;
  const fs::path dir = GoldenDir() / "cases";
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class FimGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(FimGolden, ItemsAndDrawsFromWindows) {
  const fs::path root = GoldenDir();
  const fs::path cdir = root / "cases" / GetParam();
  const nlohmann::json c = ReadJson(cdir / "case.json");
  const auto& in = c["inputs"];
  text::TextTokenizerOptions topt;
  topt.special_tokens = in["special_tokens_arg"].get<std::vector<std::string>>();
  auto tok = text::LoadTextTokenizer((root / in["tokenizer_dir"].get<std::string>()).string(), topt);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const int64_t L = in["seq_length"].get<int64_t>();
  int splits_seen = 0;
  for (const auto& [split, facts] : c["splits"].items()) {
    if (facts.is_null() || !fs::is_directory(cdir / split / "items")) continue;
    ++splits_seen;
    const fs::path items = cdir / split / "items";
    std::vector<FimConfig> configs;  // per mid
    for (const auto& m : facts["mid"]) {
      FimConfig f;
      f.rate = in["fim_rate"].get<double>();
      f.spm_rate = in["fim_spm_rate"].get<double>();
      if (!in["fim_fragment_rate"].is_null()) f.fragment_rate = in["fim_fragment_rate"];
      if (!in["fim_no_prefix"].is_null()) f.no_prefix = in["fim_no_prefix"].get<std::string>();
      const auto& ids = m["fim_token_ids"];
      f.ids = {ids["prefix"], ids["middle"], ids["suffix"], ids["pad"], ids["eod"], {}};
      if (m.contains("fim_split_sample_id") && !m["fim_split_sample_id"].is_null()) {
        f.ids.split = m["fim_split_sample_id"].get<int64_t>();
      }
      configs.push_back(f);
    }
    SampleOptions so;
    so.seq_length = L;
    so.eod_id = c["derived"]["tokenizer_eod"].get<int64_t>();
    const auto& pad_used = facts["mid"][0]["pad_token_id_used"];
    so.pad_id = pad_used.is_null() ? -1 : pad_used.get<int64_t>();
    so.reset_position_ids = in["reset_position_ids"];
    so.reset_attention_mask = in["reset_attention_mask"];
    so.eod_mask_loss = in["eod_mask_loss"];
    so.create_attention_mask = false;  // the CLI test compares attention masks

    auto window = io::ReadNpy((items / "window_before_fim.npy").string());
    ASSERT_TRUE(window.ok()) << window.status().ToString();
    const std::vector<int64_t> w = window->ToInt64();
    auto load = [&](const std::string& name) {
      auto a = io::ReadNpy((items / name).string());
      EXPECT_TRUE(a.ok()) << a.status().ToString();
      return a.ok() ? *a : io::NpyArray{};
    };
    const std::vector<int64_t> tokens = load("tokens.npy").ToInt64();
    const std::vector<int64_t> labels = load("labels.npy").ToInt64();
    const std::vector<int64_t> positions = load("position_ids.npy").ToInt64();
    const std::string lm_name = fs::exists(items / "loss_mask_without_cache_leak.npy")
                                    ? "loss_mask_without_cache_leak.npy"
                                    : "loss_mask.npy";
    const std::vector<float> loss = load(lm_name).As<float>();
    std::ifstream trace_file(items / "rng_trace.jsonl");
    std::string line;
    std::map<int, std::unique_ptr<FimRandom>> streams;
    int64_t r = 0, draws = 0;
    while (std::getline(trace_file, line)) {
      if (line.empty()) continue;
      SCOPED_TRACE(GetParam() + " " + split + " fetch " + std::to_string(r));
      const nlohmann::json t = nlohmann::json::parse(line);
      const int mid = t["mid"].get<int>();
      ASSERT_LT(mid, static_cast<int>(configs.size()));
      auto& rng = streams[mid];
      if (!rng) rng = std::make_unique<FimRandom>(in["seed"].get<uint32_t>());
      std::vector<FimDraw> got;
      rng->set_trace(&got);
      ASSERT_LE(static_cast<size_t>((r + 1) * (L + 1)), w.size());
      std::span<const int64_t> win(w.data() + r * (L + 1), static_cast<size_t>(L + 1));
      auto out = FimTransform(**tok, configs[mid], win, L + 1, rng.get());
      rng->set_trace(nullptr);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      const std::vector<FimDraw> want = RecordedDraws(t["rng_calls"]);
      ASSERT_EQ(got, want) << "got " << Describe(got) << "\nwant " << Describe(want);
      draws += static_cast<int64_t>(got.size());
      std::vector<int64_t> tk(L), lb(L), ps(L);
      std::vector<float> lm(L);
      FieldTargets f;
      f.tokens = tk.data();
      f.labels = lb.data();
      f.position_ids = ps.data();
      f.loss_mask = lm.data();
      WindowFields(out->data(), so, f);
      const auto at = static_cast<size_t>(r * L);
      ASSERT_EQ(tk, std::vector<int64_t>(tokens.begin() + at, tokens.begin() + at + L));
      ASSERT_EQ(lb, std::vector<int64_t>(labels.begin() + at, labels.begin() + at + L));
      ASSERT_EQ(ps, std::vector<int64_t>(positions.begin() + at, positions.begin() + at + L));
      ASSERT_EQ(lm, std::vector<float>(loss.begin() + at, loss.begin() + at + L)) << lm_name;
      ++r;
    }
    EXPECT_EQ(r * L, static_cast<int64_t>(tokens.size()));
    EXPECT_GT(draws, 0);
  }
  EXPECT_GT(splits_seen, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, FimGolden, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param; });

// The legacy draws by hand: binomial always consumes a double (two 32-bit outputs), also for
// p = 0 and p = 1; randint(0, 1) draws nothing.
TEST(FimRandom, ConsumptionPerCall) {
  FimRandom a(5), b(5);
  EXPECT_EQ(a.Binomial1(0.0), 0);
  EXPECT_EQ(a.Binomial1(1.0), 1);
  EXPECT_EQ(a.RandInt2(1), (std::array<int64_t, 2>{0, 0}));
  b.NextDouble();
  b.NextDouble();
  EXPECT_EQ(a.NextDouble(), b.NextDouble());
}

}  // namespace
}  // namespace gridfeed::order::fim
