#include "gridfeed/text/prep.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <vector>

#include "gridfeed/core/stopwatch.h"
#include "gridfeed/core/usable_cpus.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/indexed_dataset_builder.h"
#include "gridfeed/io/line_reader.h"
#include "gridfeed/text/prep_tokenizer.h"
#include "gridfeed/text/text_tokenizer.h"
#include "gridfeed/text/tokenizer_spec.h"

namespace gridfeed::text {
namespace {

constexpr size_t kBatchLines = 2048;

struct Encoded {
  std::vector<Sequence> sequences;
  Status status;  // non-ok: the line is bad
};

Encoded EncodeLine(const std::string& line, const PrepOptions& opt, const Tokenizer& tok,
                   int64_t eod) {
  Encoded out;
  if (const auto nul = line.find('\0'); nul != std::string::npos) {
    out.status = InvalidArgument("NUL byte at column " + std::to_string(nul + 1));
    return out;
  }
  auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Say why (e.g. invalid UTF-8, a missing quote): parse again for the parser's reason.
    std::string why = "invalid JSON";
    try {
      const auto again = nlohmann::json::parse(line);
      why = "invalid JSON (" + std::to_string(again.size()) + ")";  // not reached
    } catch (const nlohmann::json::parse_error& e) {
      why = e.what();
      const auto at = why.find("] ");  // drop nlohmann's "[json.exception...] " tag
      if (at != std::string::npos) why = "invalid JSON: " + why.substr(at + 2);
    }
    out.status = InvalidArgument(why);
    return out;
  }
  if (!doc.is_object()) {
    out.status = InvalidArgument("not a JSON object");
    return out;
  }
  auto it = doc.find(opt.json_key);
  if (it == doc.end()) {
    out.status = InvalidArgument("missing key '" + opt.json_key + "'");
    return out;
  }
  auto seqs = tok.Encode(*it);
  if (!seqs.ok()) {
    out.status = seqs.status();
    return out;
  }
  out.sequences = std::move(seqs).value();
  if (opt.append_eod && !out.sequences.empty()) out.sequences.back().push_back(eod);
  return out;
}

}  // namespace

Result<PrepStats> RunPrep(const PrepOptions& opt) {
  if (opt.input.empty()) return InvalidArgument("--input is required");
  if (opt.output_prefix.empty()) return InvalidArgument("--output-prefix is required");
  std::unique_ptr<Tokenizer> tok;
  if (opt.pretokenized) {
    if (!opt.tokenizer_model.empty() || !opt.tokenizer.type.empty()) {
      return InvalidArgument(
          "--pretokenized and --tokenizer-model / --tokenizer-type are mutually exclusive");
    }
    if (!opt.vocab_size || *opt.vocab_size <= 0) {
      return InvalidArgument("--pretokenized needs --vocab-size N (it decides the token dtype)");
    }
    tok = MakePretokenizedTokenizer(*opt.vocab_size);
  } else {
    if (opt.tokenizer_model.empty() && opt.tokenizer.type.empty()) {
      return InvalidArgument("give --tokenizer-model FILE, --tokenizer-type or --pretokenized");
    }
    // Megatron's tokenizer flags (tokenizer_spec.h); --vocab-size is NullTokenizer's and
    // TikTokenizer's vocabulary size, and for every kind must equal the tokenizer's.
    TokenizerSpec spec = opt.tokenizer;
    spec.model = opt.tokenizer_model;
    if (opt.vocab_size) spec.vocab_size = std::max<int64_t>(*opt.vocab_size, 0);
    GRIDFEED_ASSIGN_OR_RETURN(auto text_tok, LoadTokenizer(spec));
    tok = MakePrepTokenizer(std::move(text_tok));
    if (opt.vocab_size && *opt.vocab_size != tok->vocab_size()) {
      return InvalidArgument("--vocab-size " + std::to_string(*opt.vocab_size) +
                             " differs from the model's " + std::to_string(tok->vocab_size()));
    }
  }
  if (opt.eod_id && !opt.append_eod) {
    return InvalidArgument(
        "--eod-id is given without --append-eod (add --append-eod to append it)");
  }
  int64_t eod = -1;
  if (opt.append_eod) {
    if (opt.eod_id) {
      eod = *opt.eod_id;
    } else if (tok->eos_id()) {
      eod = *tok->eos_id();
    } else {
      return InvalidArgument("--append-eod needs --eod-id (the tokenizer has no EOS)");
    }
    if (eod < 0 || eod >= tok->vocab_size()) {
      return InvalidArgument("--eod-id " + std::to_string(eod) + " is outside the vocabulary [0, " +
                             std::to_string(tok->vocab_size()) + ")");
    }
  }

  // An output that is an input (by file identity: links and other spellings included) would be
  // overwritten while, or before, it is read.
  for (const char* ext : {".bin", ".idx"}) {
    const std::string out = opt.output_prefix + ext;
    for (const std::string& in :
         {opt.input, opt.tokenizer_model, opt.tokenizer.vocab_file, opt.tokenizer.merge_file}) {
      if (!in.empty() && io::SameFile(in, out)) {
        return InvalidArgument("--output-prefix '" + opt.output_prefix + "' would overwrite '" +
                               in + "', an input of this prep ('" + out + "' is that file)");
      }
    }
  }

  PrepStats stats;
  stats.dtype = io::DTypeForVocabSize(tok->vocab_size());
  GRIDFEED_ASSIGN_OR_RETURN(io::LineReader reader, io::LineReader::Open(opt.input));
  GRIDFEED_ASSIGN_OR_RETURN(io::IndexedDatasetBuilder builder,
                            io::IndexedDatasetBuilder::Create(opt.output_prefix, stats.dtype));
  const int workers = opt.workers > 0 ? opt.workers : UsableCpus();
  const Stopwatch start;
  Stopwatch since_report;

  // Three batches in flight: while the workers encode one, this thread writes the one before
  // (in input order) and reads the one after, so reading and writing overlap the encoding.
  struct Batch {
    std::vector<std::string> lines;
    std::vector<Encoded> encoded;
  };
  Batch prev, cur, next;
  bool eof = false;
  const auto read_batch = [&](Batch* b) {
    b->lines.clear();
    std::string line;
    while (b->lines.size() < kBatchLines) {
      if (!reader.Next(&line)) {
        eof = true;
        break;
      }
      // Python's text mode (Megatron's reader) also ends a line at a lone '\r'; the reader has
      // already taken the "\r\n" and '\n' ends. (Inside a JSON string a raw '\r' is invalid.)
      size_t from = 0;
      for (size_t cr; (cr = line.find('\r', from)) != std::string::npos; from = cr + 1) {
        b->lines.push_back(line.substr(from, cr - from));
      }
      b->lines.push_back(from == 0 ? std::move(line) : line.substr(from));
    }
  };
  const auto write_batch = [&](Batch& b) -> Status {
    for (size_t i = 0; i < b.lines.size(); ++i) {
      ++stats.lines;
      // Blank lines are not documents (a trailing newline is common).
      if (b.lines[i].find_first_not_of(" \t") == std::string::npos) continue;
      if (!b.encoded[i].status.ok()) {
        const std::string where = "'" + opt.input + "' line " + std::to_string(stats.lines);
        if (!opt.skip_bad_lines) {
          return b.encoded[i].status.WithContext(where +
                                                 " (use --skip-bad-lines to skip such lines)");
        }
        if (stats.skipped_lines == 0)
          stats.first_skipped = where + ": " + b.encoded[i].status.message();
        ++stats.skipped_lines;
        continue;
      }
      for (const auto& seq : b.encoded[i].sequences) {
        Status st = builder.AddItem(seq);
        if (!st.ok())
          return st.WithContext("'" + opt.input + "' line " + std::to_string(stats.lines));
        ++stats.sequences;
        stats.tokens += seq.size();
      }
      builder.EndDocument();
      ++stats.documents;
    }
    b.lines.clear();
    b.encoded.clear();
    if (opt.progress && (since_report.Seconds() > 0.5 || eof)) {
      since_report.Lap();
      const double s = start.Seconds();
      std::fprintf(stderr, "\rprep: %lld documents, %.0f documents/s, %.3g tokens/s   ",
                   static_cast<long long>(stats.documents), stats.documents / s, stats.tokens / s);
      std::fflush(stderr);
    }
    return Status::Ok();
  };

  read_batch(&cur);
  GRIDFEED_RETURN_IF_ERROR(reader.status());
  while (!cur.lines.empty()) {
    cur.encoded.assign(cur.lines.size(), Encoded{});
    Status side = Status::Ok();  // this thread's own work while the workers encode
    {
      std::atomic<size_t> taken{0};  // lines handed out one at a time: documents vary in length
      std::vector<std::jthread> threads;
      try {
        for (int w = 0; w < workers; ++w) {
          threads.emplace_back([&] {
            for (size_t i; (i = taken.fetch_add(1)) < cur.lines.size();) {
              cur.encoded[i] = EncodeLine(cur.lines[i], opt, *tok, eod);
            }
          });
        }
      } catch (const std::system_error& e) {
        side = IoError("--workers " + std::to_string(workers) + ": could start only " +
                       std::to_string(threads.size()) + " worker threads (" + e.what() +
                       "); give fewer workers");
      }
      if (side.ok()) side = write_batch(prev);
      if (side.ok() && !eof) read_batch(&next);
    }  // the workers are joined here, on every path
    GRIDFEED_RETURN_IF_ERROR(side);
    GRIDFEED_RETURN_IF_ERROR(reader.status());
    std::swap(prev, cur);
    std::swap(cur, next);
  }
  GRIDFEED_RETURN_IF_ERROR(write_batch(prev));
  if (opt.progress) std::fprintf(stderr, "\n");
  GRIDFEED_RETURN_IF_ERROR(builder.Finalize());
  stats.seconds = start.Seconds();
  return stats;
}

}  // namespace gridfeed::text
