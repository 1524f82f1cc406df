#include "gridfeed/text/prep.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/indexed_dataset.h"
#include "testing/paths.h"

namespace gridfeed::text {
namespace {

using io::DType;
using io::IndexedDataset;
using io::ReadFileToString;
using io::WriteStringToFile;

using gridfeed::testing::GoldenDir;
using gridfeed::testing::ScratchDir;

// One JSON line per document of `prefix`: {"ids": [...]} for one-sequence documents when
// `flat`, else {"ids": [[...], ...]}.
std::string CorpusToJsonl(const std::string& prefix, bool flat) {
  auto ds = IndexedDataset::Open(prefix).value();
  std::string out;
  auto docs = ds.document_indices();
  for (size_t d = 0; d + 1 < docs.size(); ++d) {
    nlohmann::json seqs = nlohmann::json::array();
    for (int64_t s = docs[d]; s < docs[d + 1]; ++s) {
      auto span = ds.Get(s).value();
      nlohmann::json ids = nlohmann::json::array();
      for (int64_t i = 0; i < span.length_tokens; ++i) ids.push_back(span[i]);
      seqs.push_back(ids);
    }
    nlohmann::json line = {{"ids", flat && seqs.size() == 1 ? seqs[0] : seqs}, {"n", d}};
    out += line.dump() + "\n";
  }
  return out;
}

struct PrepCase {
  std::string corpus;
  int64_t vocab;
  bool flat;
};

class PrepReproducesCorpus : public ::testing::TestWithParam<PrepCase> {};

TEST_P(PrepReproducesCorpus, ByteForByte) {
  const auto& c = GetParam();
  const std::string src = GoldenDir() + "/corpora/" + c.corpus;
  const std::string dir = ScratchDir("prep_" + c.corpus + (c.flat ? "_flat" : "_nested"));
  ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl", CorpusToJsonl(src, c.flat)).ok());
  for (int workers : {1, 2, 3}) {
    PrepOptions o;
    o.input = dir + "/in.jsonl";
    o.output_prefix = dir + "/out" + std::to_string(workers);
    o.json_key = "ids";
    o.pretokenized = true;
    o.vocab_size = c.vocab;
    o.workers = workers;
    auto stats = RunPrep(o);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    for (const char* ext : {".bin", ".idx"}) {
      EXPECT_EQ(ReadFileToString(o.output_prefix + ext).value(),
                ReadFileToString(src + ext).value())
          << c.corpus << ext << " with " << workers << " workers";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, PrepReproducesCorpus,
                         ::testing::Values(PrepCase{"corpus_u16", 50000, true},
                                           PrepCase{"corpus_i32", 128256, true},
                                           PrepCase{"corpus_i32", 128256, false},
                                           PrepCase{"corpus_multi", 50000, false},
                                           PrepCase{"corpus_tiny", 50000, true}));

PrepOptions Pretok(const std::string& dir) {
  PrepOptions o;
  o.input = dir + "/in.jsonl";
  o.output_prefix = dir + "/out";
  o.pretokenized = true;
  o.vocab_size = 100;
  o.workers = 2;
  return o;
}

TEST(Prep, ReadsGzipAndAppendsEod) {
  const std::string dir = ScratchDir("prep_gz");
  gzFile gz = gzopen((dir + "/in.jsonl.gz").c_str(), "wb");
  const std::string text = "{\"text\": [1, 2]}\n{\"text\": [[3], [4, 5]]}\n";
  gzwrite(gz, text.data(), text.size());
  gzclose(gz);
  PrepOptions o = Pretok(dir);
  o.input = dir + "/in.jsonl.gz";
  o.append_eod = true;
  o.eod_id = 0;
  auto s = RunPrep(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents, 2);
  EXPECT_EQ(s->sequences, 3);
  auto ds = IndexedDataset::Open(dir + "/out").value();
  EXPECT_EQ(ds.sequence_lengths().ToVector(), (std::vector<int32_t>{3, 1, 3}));
  EXPECT_EQ(ds.Get(0).value()[2], 0);  // EOD after the document's only sequence
  EXPECT_EQ(ds.Get(1).value()[0], 3);  // no EOD after a non-final sequence
  EXPECT_EQ(ds.Get(2).value()[2], 0);  // EOD after the last sequence
  EXPECT_EQ(ds.dtype(), DType::kUInt16);
}

struct BadLine {
  std::string name;
  std::string line;
  std::string message_part;
};

class PrepBadLine : public ::testing::TestWithParam<BadLine> {};

TEST_P(PrepBadLine, StopsWithLineNumberAndLeavesNothing) {
  const std::string dir = ScratchDir("prep_bad_" + GetParam().name);
  ASSERT_TRUE(
      WriteStringToFile(dir + "/in.jsonl", "{\"text\": [1]}\n" + GetParam().line + "\n").ok());
  auto s = RunPrep(Pretok(dir));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("line 2"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find(GetParam().message_part), std::string::npos)
      << s.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.idx"));
  // Only the input remains: no temporary files either.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);

  PrepOptions skip = Pretok(dir);
  skip.skip_bad_lines = true;
  auto ok = RunPrep(skip);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->skipped_lines, 1);
  EXPECT_EQ(ok->documents, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Lines, PrepBadLine,
    ::testing::Values(BadLine{"not_json", "{text: 1", "invalid JSON"},
                      BadLine{"missing_key", "{\"other\": [1]}", "missing key 'text'"},
                      BadLine{"out_of_vocab", "{\"text\": [1, 100]}", "outside the vocabulary"},
                      BadLine{"negative", "{\"text\": [-1]}", "outside the vocabulary"},
                      BadLine{"not_ints", "{\"text\": \"words\"}", "not a list of token ids"}),
    [](const auto& info) { return info.param.name; });

TEST(Prep, RejectsBadOptions) {
  const std::string dir = ScratchDir("prep_opts");
  ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl", "{\"text\": [1]}\n").ok());
  PrepOptions no_vocab = Pretok(dir);
  no_vocab.vocab_size.reset();
  EXPECT_EQ(RunPrep(no_vocab).status().code(), StatusCode::kInvalidArgument);
  PrepOptions eod = Pretok(dir);
  eod.append_eod = true;  // pretokenized input has no EOS of its own
  EXPECT_NE(RunPrep(eod).status().message().find("--eod-id"), std::string::npos);
  PrepOptions missing = Pretok(dir);
  missing.input = dir + "/absent.jsonl";
  EXPECT_EQ(RunPrep(missing).status().code(), StatusCode::kNotFound);
  PrepOptions model;
  model.input = dir + "/in.jsonl";
  model.output_prefix = dir + "/o";
  model.tokenizer_model = dir + "/none.model";
  EXPECT_EQ(RunPrep(model).status().code(), StatusCode::kNotFound);
}

// Gzip of `lines`, plus the compressed size right after line `sync_after` (a full flush there,
// so a cut at that offset ends the stream exactly at a line boundary).
std::string Gzip(const std::vector<std::string>& lines, size_t sync_after, size_t* sync_offset) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out;
  auto feed = [&](const std::string& in, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    do {
      char buf[4096];
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof(buf);
      deflate(&z, flush);
      out.append(buf, sizeof(buf) - z.avail_out);
    } while (z.avail_out == 0);
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    feed(lines[i] + "\n", i + 1 == sync_after ? Z_FULL_FLUSH : Z_NO_FLUSH);
    if (i + 1 == sync_after) *sync_offset = out.size();
  }
  feed("", Z_FINISH);
  deflateEnd(&z);
  return out;
}

TEST(Prep, TruncatedGzipIsDataLossWhateverTheFlags) {
  const std::string dir = ScratchDir("prep_gz_cut");
  std::vector<std::string> lines;
  for (int i = 0; i < 2000; ++i) lines.push_back("{\"text\": [" + std::to_string(i % 90) + "]}");
  size_t at_line = 0;
  const std::string gz = Gzip(lines, 1000, &at_line);
  ASSERT_GT(at_line, 0u);
  for (size_t cut : {at_line, gz.size() / 2 + 3, gz.size() - 4}) {
    ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl", gz.substr(0, cut)).ok());
    for (bool skip : {false, true}) {
      PrepOptions o = Pretok(dir);
      o.skip_bad_lines = skip;
      auto s = RunPrep(o);
      ASSERT_FALSE(s.ok()) << "cut at " << cut << " of " << gz.size() << " accepted, skip=" << skip
                           << ", " << s->documents << " documents";
      EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().ToString();
      EXPECT_NE(s.status().message().find("in.jsonl"), std::string::npos);
      EXPECT_FALSE(std::filesystem::exists(dir + "/out.bin"));
    }
  }
  ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl", gz).ok());  // the whole stream is fine
  auto s = RunPrep(Pretok(dir));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents, 2000);
}

TEST(Prep, NulByteIsABadLineWithItsOwnLineNumber) {
  const std::string dir = ScratchDir("prep_nul");
  const std::string text = std::string("{\"text\": [1]}\n{\"text\": [2]}") + '\0' +
                           "junk\n{\"text\": [3]}\nnot json\n{\"text\": [4]}\n";
  ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl", text).ok());
  auto bad = RunPrep(Pretok(dir));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("NUL"), std::string::npos) << bad.status().message();
  PrepOptions skip = Pretok(dir);
  skip.skip_bad_lines = true;
  auto s = RunPrep(skip);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->lines, 5);
  EXPECT_EQ(s->skipped_lines, 2);
  EXPECT_EQ(s->documents, 3);  // lines 1, 3 and 5
  EXPECT_NE(s->first_skipped.find("line 2"), std::string::npos) << s->first_skipped;
  auto ds = IndexedDataset::Open(dir + "/out").value();
  EXPECT_EQ(ds.Get(1).value()[0], 3);
  EXPECT_EQ(ds.Get(2).value()[0], 4);
}

TEST(Prep, InvalidJsonSaysWhy) {
  const std::string dir = ScratchDir("prep_utf8");
  ASSERT_TRUE(
      WriteStringToFile(dir + "/in.jsonl", "{\"text\": [1]}\n{\"text\": \"\xff\xfe\"}\n").ok());
  auto bad = RunPrep(Pretok(dir));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("UTF-8"), std::string::npos) << bad.status().message();
  EXPECT_EQ(bad.status().message().find("not a JSON object"), std::string::npos);
}

TEST(Prep, EmptyPretokenizedDocumentHasNoSequence) {
  const std::string dir = ScratchDir("prep_empty_doc");
  ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl",
                                "{\"text\": [1]}\n{\"text\": []}\n{\"text\": [[], [2], []]}\n")
                  .ok());
  for (bool eod : {false, true}) {
    PrepOptions o = Pretok(dir);
    o.append_eod = eod;
    if (eod) o.eod_id = 0;
    auto s = RunPrep(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->documents, 3);  // the empty document is recorded, as in text mode
    EXPECT_EQ(s->sequences, 2);
    auto ds = IndexedDataset::Open(dir + "/out").value();
    EXPECT_EQ(ds.sequence_lengths().ToVector(),
              eod ? (std::vector<int32_t>{2, 2}) : (std::vector<int32_t>{1, 1}));
    EXPECT_EQ(ds.document_indices().ToVector(), (std::vector<int64_t>{0, 1, 1, 2}));
  }
}

TEST(Prep, EodIdWithoutAppendEodIsAnError) {
  const std::string dir = ScratchDir("prep_eod_alone");
  ASSERT_TRUE(WriteStringToFile(dir + "/in.jsonl", "{\"text\": [1]}\n").ok());
  PrepOptions o = Pretok(dir);
  o.eod_id = 0;
  auto s = RunPrep(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--eod-id"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("--append-eod"), std::string::npos) << s.status().message();
}

// An output that is an input is refused (issue 51: `--input X.bin --output-prefix X` used to
// overwrite its own input), by file identity: through a link too. The input is untouched.
TEST(Prep, RefusesAnOutputThatIsAnInput) {
  const std::string dir = ScratchDir("prep_self_overwrite");
  const std::string text = "{\"ids\": [1, 2, 3]}\n";
  ASSERT_TRUE(WriteStringToFile(dir + "/x.bin", text).ok());
  std::filesystem::create_symlink(dir + "/x.bin", dir + "/link.idx");
  for (const std::string& input : {dir + "/x.bin", dir + "/link.idx"}) {
    for (const std::string& prefix : {dir + "/x", dir + "/link"}) {
      PrepOptions o;
      o.input = input;
      o.output_prefix = prefix;
      o.json_key = "ids";
      o.pretokenized = true;
      o.vocab_size = 10;
      auto stats = RunPrep(o);
      ASSERT_FALSE(stats.ok()) << input << " -> " << prefix;
      EXPECT_EQ(stats.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(stats.status().message().find("--output-prefix"), std::string::npos)
          << stats.status().message();
      EXPECT_EQ(ReadFileToString(dir + "/x.bin").value(), text);
    }
  }
}

}  // namespace
}  // namespace gridfeed::text
