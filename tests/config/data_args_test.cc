// Megatron's many-file data flags (config/data_args.h): the list shapes Megatron's
// get_blend_from_list reads, the per-split and sequences JSON files, the exclusions, and the
// text Megatron's build_sequences_per_dataset.py writes. The command-line path and the tables
// are checked by tests/cli/data_args_test.sh.
#include "gridfeed/config/data_args.h"

#include <gtest/gtest.h>

#include <fstream>

#include "gridfeed/config/flags.h"

namespace gridfeed::config {
namespace {

std::string Write(const std::string& name, const std::string& body) {
  const std::string path = ::testing::TempDir() + "/data_args_test_" + name;
  std::ofstream(path, std::ios::binary) << body;
  return path;
}

void ExpectError(const Status& st, const std::string& part) {
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(DataPathList, MegatronShapesPass) {
  EXPECT_TRUE(CheckDataPathList("x", {"a"}).ok());
  EXPECT_TRUE(CheckDataPathList("x", {"a", "b", "c"}).ok());  // odd: prefixes
  EXPECT_TRUE(CheckDataPathList("x", {"a", "b"}).ok());       // even, no weights: prefixes
  EXPECT_TRUE(CheckDataPathList("x", {"1", "a", "1_000", "b", " 2e-3", "c", "inf", "d"}).ok());
}

TEST(DataPathList, BrokenShapesNameTheEntry) {
  ExpectError(CheckDataPathList("W", {}), "W holds no prefix");
  ExpectError(CheckDataPathList("W", {"0.5"}), "W holds 1 entries, an odd count");
  ExpectError(CheckDataPathList("W", {"0.5", "a", "0.5"}), "starts with the weight '0.5'");
  ExpectError(CheckDataPathList("W", {"0.5", "a", "half", "b"}),
              "W: entry 3 ('half') is not a number, but entry 1 ('0.5') is a weight");
  ExpectError(CheckDataPathList("W", {"a", "b", "0.5", "c"}), "entry 1 ('a') is not a number");
  // Python's float() decides: hex and '_' at an edge are not numbers.
  ExpectError(CheckDataPathList("W", {"1", "a", "0x10", "b"}), "'0x10'");
  ExpectError(CheckDataPathList("W", {"1", "a", "_1", "b"}), "'_1'");
}

TEST(DataArgsFile, WhitespaceOfAnyKindSeparates) {
  auto got = ReadDataArgs(Write("ws.txt", "\n 0.3\tp1\r\n\n0.7   p2 \n"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<std::string>{"0.3", "p1", "0.7", "p2"}));
}

TEST(PerSplitFile, ListsStringsNumbersAndNull) {
  auto got = ReadPerSplitDataArgs(
      Write("split.json", R"({"train": [1e-12, "a", 30, "b"], "valid": " c  d ", "test": null})"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0], (std::vector<std::string>{"1e-12", "a", "30", "b"}));
  EXPECT_EQ((*got)[1], (std::vector<std::string>{"c", "d"}));
  EXPECT_FALSE((*got)[2].has_value());
}

TEST(PerSplitFile, ErrorsNameFlagFileAndKey) {
  const std::string f = Write("bad.json", R"({"train": ["a", true], "valid": null, "test": null})");
  ExpectError(ReadPerSplitDataArgs(f).status(),
              "--per-split-data-args-path '" + f + "' \"train\": entry 2 is true");
  ExpectError(
      ReadPerSplitDataArgs(Write("nokey.json", R"({"train": ["a"], "test": null})")).status(),
      "has no key \"valid\"");
  ExpectError(ReadPerSplitDataArgs(Write("bad2.json", "{")).status(), "is not valid JSON");
}

TEST(SequencesFile, CountsAndBounds) {
  auto got = ReadPerDatasetSequences(Write("seq.json", R"({"a/b": [12, 13], "c": [0, 1]})"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->at("a/b"), (std::array<int64_t, 2>{12, 13}));
  EXPECT_EQ(got->at("c"), (std::array<int64_t, 2>{0, 1}));
  ExpectError(
      ReadPerDatasetSequences(Write("s1.json", R"({"a": [4611686018427387904, 1]})")).status(),
      "\"a\": the sequence count 4611686018427387904 is not an integer in [0, 2^62)");
  ExpectError(ReadPerDatasetSequences(Write("s2.json", R"({"a": [1, 2, 3]})")).status(),
              "must be [sequence count, document count]");
}

TEST(SequencesFile, TextIsMegatronsJsonDump) {
  // json.dump({"a": (1, 2), "é/x": (3, 4)}) in Python.
  EXPECT_EQ(PerDatasetSequencesJson({{"a", {1, 2}}, {"\xc3\xa9/x", {3, 4}}}),
            "{\"a\": [1, 2], \"\\u00e9/x\": [3, 4]}");
  EXPECT_EQ(PerDatasetSequencesJson({}), "{}");
}

TEST(LoadDataArgFiles, ReadsIntoTheListsAndRefusesBoth) {
  JobOptions o;
  o.data.data_args_path = Write("blend.txt", "2 p1 1 p2");
  ASSERT_TRUE(LoadDataArgFiles(&o).ok());
  EXPECT_EQ(o.data.data_path, (std::vector<std::string>{"2", "p1", "1", "p2"}));
  ExpectError(LoadDataArgFiles(&o), "--data-path and --data-args-path");  // both set now

  JobOptions s;
  s.data.per_split_data_args_path =
      Write("split2.json", R"({"train": ["p1"], "valid": null, "test": ["p2"]})");
  s.data.split = "1,1,1";
  ExpectError(LoadDataArgFiles(&s), "--split '1,1,1' and --per-split-data-args-path");
  s.data.split.clear();
  ASSERT_TRUE(LoadDataArgFiles(&s).ok());
  EXPECT_EQ(s.data.train_data_path, (std::vector<std::string>{"p1"}));
  EXPECT_TRUE(s.data.valid_data_path.empty());
  EXPECT_EQ(s.data.test_data_path, (std::vector<std::string>{"p2"}));
}

TEST(LoadDataArgFiles, ValidateRefusesAFileThatWasNotRead) {
  JobOptions o;
  o.data.seq_length = 8;
  o.data.data_args_path = "blend.txt";
  ExpectError(Validate(o), "--data-args-path 'blend.txt' was not read");
  o.data.data_path = {"p"};  // a list beside an unread file is refused too (it would be ignored)
  ExpectError(Validate(o), "--data-args-path 'blend.txt' was not read");
  o = JobOptions();
  o.data.seq_length = 8;
  o.data.data_path = {"p"};
  o.data.per_dataset_sequences_path = "seq.json";
  ExpectError(Validate(o), "--per-dataset-sequences-path 'seq.json' was not read");
  o.data.sequences_per_dataset = std::make_shared<const SequencesPerDataset>();
  o.data.data_arg_files_read = true;
  EXPECT_TRUE(Validate(o).ok());
  o.data.sft = true;
  o.data.tokenizer_model = "tok";
  ExpectError(Validate(o), "drop it with --sft");
}

TEST(LoadDataArgFiles, ResolveReadsTheFilesFromFlags) {
  CLI::App app("test");
  OptionFlags flags(&app, Groups::All());
  const std::string blend = Write("blend3.txt", "p1 p2 p3");
  std::vector<std::string> args = {"--seq-length", "8", "--data-args-path", blend};
  std::reverse(args.begin(), args.end());
  app.parse(args);
  auto o = flags.Resolve();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->data.data_path, (std::vector<std::string>{"p1", "p2", "p3"}));
  EXPECT_EQ(o->data.data_args_path, blend);
}

}  // namespace
}  // namespace gridfeed::config
