// The option table is the one description of every option: each row must come through every
// direction (command-line flag, YAML key, canonical text and back) on its own, so a field that
// one direction forgets fails here. Canonical texts written before the table existed still
// read back and re-serialise byte for byte.
#include "gridfeed/config/options.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "gridfeed/config/canonical.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/config/mixture_schedule.h"

namespace gridfeed::config {
namespace {

// A valid value for `row` that differs from its default, as the text a user would type.
std::vector<std::string> NonDefaultArgs(const OptionRow& row) {
  const JobOptions defaults;
  return std::visit(
      [&](auto* p) -> std::vector<std::string> {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          return {};  // a bare flag
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return {"0.5", "some/prefix", "0.5", "other/prefix"};
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!row.choices.empty()) {
            for (const auto& c : row.choices) {
              if (c != *p) return {c};
            }
          }
          return {std::string("value-of-") + row.name};
        } else if constexpr (std::is_same_v<T, double>) {
          return {"0.25"};
        } else {
          return {std::to_string(*p + 3)};
        }
      },
      Get(row, defaults));
}

Result<JobOptions> FromFlags(const std::vector<std::string>& args) {
  CLI::App app("test");
  OptionFlags flags(&app, Groups::All());
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return flags.ResolveUnchecked();
}

std::string WriteYaml(const std::string& body) {
  const std::string path = ::testing::TempDir() + "/options_test.yaml";
  std::ofstream(path) << body;
  return path;
}

void ExpectOnlyThisDiffers(const OptionRow& changed, const JobOptions& got) {
  const JobOptions defaults;
  for (const auto& row : OptionTable()) {
    if (&row == &changed) {
      EXPECT_FALSE(SameValue(row, got, defaults)) << row.name << " was not set";
    } else {
      EXPECT_TRUE(SameValue(row, got, defaults)) << row.name << " changed with " << changed.name;
    }
  }
}

TEST(OptionTable, NamesAreUnique) {
  std::set<std::string> names, keys;
  for (const auto& row : OptionTable()) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    if (row.canonical != Canonical::kNo) {
      EXPECT_TRUE(keys.insert(row.key()).second) << row.key();
    }
  }
  EXPECT_GE(names.size(), 35u);
}

TEST(OptionTable, EveryRowFromItsFlag) {
  for (const auto& row : OptionTable()) {
    SCOPED_TRACE(row.name);
    std::vector<std::string> args = {row.flag()};
    for (const auto& v : NonDefaultArgs(row)) args.push_back(v);
    auto got = FromFlags(args);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectOnlyThisDiffers(row, *got);
  }
}

TEST(OptionTable, EveryRowFromItsYamlKey) {
  for (const auto& row : OptionTable()) {
    SCOPED_TRACE(row.name);
    const auto values = NonDefaultArgs(row);
    std::string body = std::string(row.name) + ": ";
    if (std::holds_alternative<bool*>(Get(row, JobOptions()))) {
      body += "true";
    } else if (std::holds_alternative<std::vector<std::string>*>(Get(row, JobOptions()))) {
      body += "[";
      for (size_t i = 0; i < values.size(); ++i) body += (i ? ", \"" : "\"") + values[i] + "\"";
      body += "]";
    } else {
      body += "\"" + values[0] + "\"";
    }
    JobOptions got;
    Status st = ApplyYaml(WriteYaml(body + "\n"), Groups::All(), &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectOnlyThisDiffers(row, got);
    // The flag and the YAML key give the same value.
    std::vector<std::string> args = {row.flag()};
    for (const auto& v : values) args.push_back(v);
    EXPECT_TRUE(SameValue(row, got, *FromFlags(args)));
  }
}

TEST(OptionTable, EveryOrderRowRoundTripsThroughTheCanonicalText) {
  const std::string default_text = CanonicalText(DataOptions());
  for (const auto& row : OptionTable()) {
    SCOPED_TRACE(row.name);
    std::vector<std::string> args = {row.flag()};
    for (const auto& v : NonDefaultArgs(row)) args.push_back(v);
    std::string base_text = default_text;
    if (row.canonical == Canonical::kFimOnly) {
      // Only FIM's order depends on it: absent from other orders' text (a resume of one with
      // another value is the same order), present in FIM's.
      EXPECT_EQ(CanonicalText(FromFlags(args)->data), default_text)
          << "a FIM-only option changed another order's text";
      args.push_back("--fim-data");
      base_text = CanonicalText(FromFlags({"--fim-data"})->data);
    }
    const JobOptions o = *FromFlags(args);
    const std::string text = CanonicalText(o.data, R"({"some/prefix": {"idx_bytes": 1}})");
    auto back = FromCanonical(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    JobOptions round;
    round.data = *back;
    if (row.canonical == Canonical::kNo) {
      EXPECT_EQ(CanonicalText(o.data), default_text) << "a non-order option changed the text";
      continue;
    }
    EXPECT_NE(CanonicalText(o.data), base_text) << "an order option is missing from the text";
    if (row.canonical == Canonical::kFimOnly) {
      EXPECT_TRUE(round.data.fim_data);
      round.data.fim_data = false;  // given with it above
    }
    ExpectOnlyThisDiffers(row, round);
    round.data.fim_data = o.data.fim_data;
    EXPECT_EQ(CanonicalText(round.data, R"({"some/prefix": {"idx_bytes": 1}})"), text);
  }
}

TEST(Canonical, TextOfTheFirstLedgerFormatReadsBackByteForByte) {
  std::ifstream in(std::string(GRIDFEED_TEST_DATA_DIR) + "/v1_canonical.json");
  std::string v1;
  std::getline(in, v1);
  ASSERT_FALSE(v1.empty());
  auto o = FromCanonical(v1);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->pad_id, 5);
  EXPECT_TRUE(o->reset_position_ids);
  EXPECT_EQ(o->dataloader_type, "single");
  const auto j = nlohmann::json::parse(v1);
  EXPECT_EQ(CanonicalText(*o, j[kDataFactsKey].dump()), v1);
  EXPECT_EQ(FingerprintOf(v1), "076e2da796621348");  // as that ledger recorded it
}

TEST(Canonical, NothingIsSilentlyDefaulted) {
  const std::string text = CanonicalText(DataOptions());
  auto j = nlohmann::json::parse(text);
  auto unknown = j;
  unknown["shuffle-harder"] = true;
  auto r = FromCanonical(unknown.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shuffle-harder"), std::string::npos);
  auto missing = j;
  missing.erase("seed");
  r = FromCanonical(missing.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("seed"), std::string::npos);
  auto wrong_type = j;
  wrong_type["seq-length"] = "64";
  EXPECT_FALSE(FromCanonical(wrong_type.dump()).ok());
  auto bad_choice = j;
  bad_choice["sampler"] = "shuffled";
  EXPECT_FALSE(FromCanonical(bad_choice.dump()).ok());
  EXPECT_EQ(FromCanonical("not json").status().code(), StatusCode::kDataLoss);
}

// An option the canonical text leaves out where it has its default (FIM's --num-workers 2) is
// named with that value when a checkpoint and a run differ in it, not "absent" (issue 51 item
// 10: a checkpoint written with an explicit --num-workers 2 was "absent in the checkpoint").
TEST(Canonical, AChangeOfAnOmittedDefaultNamesTheDefault) {
  DataOptions two;
  two.seq_length = 64;
  two.fim_data = true;
  two.num_workers = 2;  // the default: not written
  DataOptions three = two;
  three.num_workers = 3;
  const std::string a = CanonicalText(two, ""), b = CanonicalText(three, "");
  ASSERT_EQ(a.find("num-workers"), std::string::npos) << a;
  EXPECT_EQ(DescribeChange(a, b),
            "num-workers: 2 in the checkpoint (the default, which the checkpoint does not "
            "write), 3 now");
  EXPECT_EQ(DescribeChange(b, a), "num-workers: 3 in the checkpoint, 2 now (the default)");
}

TEST(Yaml, ErrorsNameTheKey) {
  JobOptions o;
  Status st = ApplyYaml(WriteYaml("seq-length: [1, 2]\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("seq-length"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml("seq-length: sixty\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("seq-length"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml("seq-lenght: 64\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("unknown key 'seq-lenght'"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml("train-iters: 5\n"), Groups{Group::kData}, &o);
  EXPECT_NE(st.message().find("not an option of this command"), std::string::npos);
}

// An unknown key names the nearest valid one: a typo, '_' for '-' (the YAML keys are the
// flags' names: seq-length), and the schedule's own keys.
TEST(Yaml, UnknownKeysNameTheNearestValidKey) {
  JobOptions o;
  Status st = ApplyYaml(WriteYaml("seq_length: 64\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("unknown key 'seq_length' (did you mean 'seq-length'?)"),
            std::string::npos)
      << st.message();
  st = ApplyYaml(WriteYaml("global-batch-sise: 8\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("did you mean 'global-batch-size'?"), std::string::npos)
      << st.message();
  st = ApplyYaml(WriteYaml("schedul: []\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("did you mean 'schedule'?"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml("max-epochs: {a: 1}\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("did you mean 'max_epochs'?"), std::string::npos) << st.message();
  // Nothing near: no guess.
  st = ApplyYaml(WriteYaml("frobnicate: 1\n"), Groups::All(), &o);
  EXPECT_NE(st.message().find("unknown key 'frobnicate'"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("did you mean"), std::string::npos) << st.message();
  // Inside the schedule: stage keys, source keys, source names.
  const std::string sources = "seq-length: 64\nsources: {web: w, code: {path: c, tokens: 5}}\n";
  st = ApplyYaml(WriteYaml(sources + "schedule: [{samples: 5, mixtrue: {web: 1}}]\n"),
                 Groups::All(), &o);
  EXPECT_NE(st.message().find("schedule[0].mixtrue is not a stage key"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("did you mean 'mixture'?"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml(sources + "schedule: [{samples: 5, seq-lenght: 8, alpha: 1}]\n"),
                 Groups::All(), &o);
  EXPECT_NE(st.message().find("did you mean 'seq_length'?"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml("sources: {web: {path: w, tokns: 5}}\nschedule: [{samples: 5, "
                           "alpha: 1}]\n"),
                 Groups::All(), &o);
  EXPECT_NE(st.message().find("sources.web.tokns"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("did you mean 'tokens'?"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml(sources + "schedule: [{samples: 5, mixture: {wbe: 1}}]\n"),
                 Groups::All(), &o);
  EXPECT_NE(st.message().find("schedule[0].mixture.wbe"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("did you mean 'web'?"), std::string::npos) << st.message();
  st = ApplyYaml(WriteYaml(sources + "schedule: [{samples: 5, alpha: 1}]\nmax_epochs: {cod: 2}\n"),
                 Groups::All(), &o);
  EXPECT_NE(st.message().find("did you mean 'code'?"), std::string::npos) << st.message();
}

// The message an unknown command-line argument gives (as the programs print it).
std::string UnknownFlagMessage(CLI::App* app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());
  try {
    app->parse(args);
  } catch (const CLI::ParseError& e) {
    return DescribeParseError(*app, e);
  }
  return "parsed";
}

TEST(Flags, UnknownFlagsNameTheNearestFlag) {
  CLI::App app("test");
  OptionFlags flags(&app, Groups::All());
  std::string m = UnknownFlagMessage(&app, {"--seq_length", "64"});
  EXPECT_NE(m.find("unknown option '--seq_length' (did you mean '--seq-length'?)"),
            std::string::npos)
      << m;
  CLI::App app2("test");
  OptionFlags flags2(&app2, Groups::All());
  m = UnknownFlagMessage(&app2, {"--global-batch-sise=8"});
  EXPECT_NE(m.find("'--global-batch-sise' (did you mean '--global-batch-size'?)"),
            std::string::npos)
      << m;
  // Given to a subcommand: its flags, and the subcommand is named.
  CLI::App top("top");
  CLI::App* run = top.add_subcommand("run", "");
  OptionFlags run_flags(run, Groups::All());
  top.add_subcommand("other", "")->add_option("--seq-lengths");
  m = UnknownFlagMessage(&top, {"run", "--seq-lenght", "64", "--train-iters", "2"});
  EXPECT_NE(m.find("run: unknown option '--seq-lenght' (did you mean '--seq-length'?)"),
            std::string::npos)
      << m;
  // Other parse errors are CLI11's.
  CLI::App app3("test");
  OptionFlags flags3(&app3, Groups::All());
  m = UnknownFlagMessage(&app3, {"--seq-length", "sixty"});
  EXPECT_NE(m.find("seq-length"), std::string::npos) << m;
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;
}

// Aliases of aliases (a "billion laughs" YAML) are refused naming the file before anything
// walks them: inside the schedule, and anywhere in the file.
TEST(Yaml, AliasBombsAreRefusedNamingTheFile) {
  auto bomb = [](const std::string& indent) {
    std::string y = indent + "- &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i <= 7; ++i) {
      const std::string prev = "*a" + std::to_string(i - 1);
      y += indent + "- &a" + std::to_string(i) + " [" + prev;
      for (int j = 1; j < 10; ++j) y += ", " + prev;
      y += "]\n";
    }
    return y;
  };
  JobOptions o;
  const std::string in_schedule =
      WriteYaml("seq-length: 64\nsources: {web: w}\nschedule:\n" + bomb("  "));
  Status st = ApplyYaml(in_schedule, Groups::All(), &o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(in_schedule), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("YAML nodes"), std::string::npos) << st.message();
  const std::string in_option = WriteYaml("seq-length: 64\ndata-path:\n" + bomb("  "));
  st = ApplyYaml(in_option, Groups::All(), &o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("YAML nodes"), std::string::npos) << st.message();
  // A schedule given to MixtureScheduleFromYaml directly is bounded too.
  std::string json;
  st = MixtureScheduleFromYaml("direct.yaml",
                               YAML::Load("sources: {web: w}\nschedule:\n" + bomb("  ")), &json);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("direct.yaml"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("YAML nodes"), std::string::npos) << st.message();
}

JobOptions Valid() {
  JobOptions o;
  o.data.seq_length = 64;
  return o;
}

void ExpectRefused(const JobOptions& o, const std::string& flag) {
  Status st = Validate(o);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << flag;
  EXPECT_NE(st.message().find(flag), std::string::npos) << st.message();
}

TEST(Validate, NamesTheFlagOfEveryNonsenseNumber) {
  EXPECT_TRUE(Validate(Valid()).ok());
  auto o = Valid();
  o.batch.global_batch_size = -8;
  ExpectRefused(o, "--global-batch-size");
  o = Valid();
  o.run.train_iters = -1;
  ExpectRefused(o, "--train-iters");
  o = Valid();
  o.data.mid_level_dataset_surplus = std::nan("");
  ExpectRefused(o, "--mid-level-dataset-surplus");
  EXPECT_NE(Validate(o).message().find("got nan"), std::string::npos) << Validate(o).message();
  o = Valid();
  o.data.train_samples = "9223372036854775807";  // x seq-length overflows int64
  ExpectRefused(o, "--train-samples");
  o = Valid();
  o.data.train_samples = "99999999999999999999";
  ExpectRefused(o, "--train-samples");
  o = Valid();
  o.data.seed = int64_t{1} << 32;
  ExpectRefused(o, "--seed");
  o = Valid();
  o.data.dataloader_type = "random";
  ExpectRefused(o, "--dataloader-type");
  o = Valid();
  o.grid.context_parallel_size = 3;  // 64 % 6 != 0
  ExpectRefused(o, "--context-parallel-size");
  o = Valid();
  o.batch.micro_batch_size = int64_t{1} << 50;
  ExpectRefused(o, "--micro-batch-size");
}

// A value above a row's upper bound is told that bound, not only the lower one.
TEST(Validate, UpperBoundViolationsPrintTheUpperBound) {
  auto o = Valid();
  o.run.save_interval = int64_t{1} << 41;
  Status st = Validate(o);
  EXPECT_NE(st.message().find("--save-interval must be >= 0 and at most 2^40, got 2199023255552"),
            std::string::npos)
      << st.message();
  o = Valid();
  o.resume.consumed_samples = std::numeric_limits<int64_t>::max();
  st = Validate(o);
  EXPECT_NE(st.message().find("--consumed-samples must be >= 0 and at most 2^62 - 1"),
            std::string::npos)
      << st.message();
  o = Valid();
  o.grid.data_parallel_size = int64_t{1} << 25;
  st = Validate(o);
  EXPECT_NE(st.message().find("at most 2^24"), std::string::npos) << st.message();
  o = Valid();
  o.data.vocab_size = -1;  // below: the lower bound as before
  st = Validate(o);
  EXPECT_NE(st.message().find("--vocab-size must be >= 0, got -1"), std::string::npos)
      << st.message();
}

TEST(Validate, GridAgainstTheWorld) {
  auto o = Valid();
  o.grid.tensor_model_parallel_size = 2;
  EXPECT_EQ(*ValidateGrid(o, 8), 4);
  EXPECT_NE(ValidateGrid(o, 7).status().message().find("--tensor-model-parallel-size"),
            std::string::npos);
  o.grid.data_parallel_size = 2;
  EXPECT_NE(ValidateGrid(o, 8).status().message().find("--data-parallel-size"), std::string::npos);
  o = Valid();
  o.batch.micro_batch_size = 2;
  o.batch.global_batch_size = 6;
  EXPECT_NE(ValidateGrid(o, 4).status().message().find("--global-batch-size"), std::string::npos);
}

TEST(Agreement, NamesTheFirstDifferentOption) {
  auto a = Valid(), b = Valid();
  EXPECT_EQ(DescribeDifference(AgreementText(a), b), "");
  b.run.ledger = "elsewhere";
  EXPECT_NE(DescribeDifference(AgreementText(a), b).find("--ledger"), std::string::npos);
}

}  // namespace
}  // namespace gridfeed::config
