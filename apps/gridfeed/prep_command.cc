// gridfeed prep: JSONL -> .bin/.idx.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/text/prep.h"

namespace gridfeed::app {

Runner RegisterPrep(CLI::App& app) {
  auto opt = std::make_shared<text::PrepOptions>();
  auto vocab = std::make_shared<int64_t>(-1);
  auto eod = std::make_shared<int64_t>(-1);
  CLI::App* sub = app.add_subcommand("prep", "Tokenize JSONL into Megatron .bin/.idx files");
  sub->add_option("--input", opt->input, "JSONL file, one object per line (plain or .gz)")
      ->required();
  sub->add_option("--output-prefix", opt->output_prefix, "Writes PREFIX.bin and PREFIX.idx")
      ->required();
  sub->add_option("--json-key", opt->json_key, "Key holding the text or token ids")
      ->capture_default_str();
  sub->add_option("--tokenizer-model", opt->tokenizer_model,
                  "SentencePiece model file, gf_tokenizer.json, or a folder holding one");
  auto* tspec = &opt->tokenizer;
  sub->add_option("--tokenizer-type", tspec->type,
                  "Megatron's tokenizer type: HuggingFaceTokenizer, GPT2BPETokenizer, "
                  "TikTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, "
                  "Llama2Tokenizer, NullTokenizer (default: detected from --tokenizer-model)");
  sub->add_option("--vocab-file", tspec->vocab_file, "GPT2BPETokenizer: vocab.json");
  sub->add_option("--merge-file", tspec->merge_file, "GPT2BPETokenizer: merges.txt");
  sub->add_option("--tiktoken-pattern", tspec->tiktoken_pattern,
                  "TikTokenizer: the split pattern, v1 or v2 (default v2)");
  sub->add_option("--tiktoken-num-special-tokens", tspec->tiktoken_num_special_tokens,
                  "TikTokenizer: ids below this are special tokens")
      ->capture_default_str();
  auto special = std::make_shared<std::vector<std::string>>();
  CLI::Option* special_opt = sub->add_option(
      "--tokenizer-special-tokens", *special,
      "TikTokenizer's special tokens (default <unk> <s> </s> <mask> <pad> <cls> <sep>); "
      "additional special tokens of HuggingFaceTokenizer / GPT2BPETokenizer");
  sub->add_flag("--pretokenized", opt->pretokenized,
                "The key holds token ids: a list (one sequence) or a list of lists");
  CLI::Option* vocab_opt = sub->add_option(
      "--vocab-size", *vocab,
      "Vocabulary size (needed with --pretokenized and NullTokenizer; TikTokenizer's size)");
  sub->add_flag("--append-eod", opt->append_eod, "Append the EOD id to every document");
  CLI::Option* eod_opt =
      sub->add_option("--eod-id", *eod, "EOD id with --append-eod (default: the tokenizer's EOS)");
  sub->add_flag("--skip-bad-lines", opt->skip_bad_lines, "Count and skip malformed lines");
  sub->add_option("--workers", opt->workers, "Encoding threads (0 = all cores)")
      ->capture_default_str();
  return [opt, vocab, eod, vocab_opt, eod_opt, special, special_opt]() -> Status {
    if (special_opt->count() > 0) opt->tokenizer.tokenizer_special_tokens = *special;
    // Given means set, whatever the value (RunPrep checks it and the flags that go with it).
    if (vocab_opt->count() > 0) opt->vocab_size = *vocab;
    if (eod_opt->count() > 0) opt->eod_id = *eod;
    opt->progress = ::isatty(STDERR_FILENO) != 0;
    // A prep killed by SIGINT/SIGTERM/SIGHUP removes its temporary .bin/.idx files first.
    GRIDFEED_RETURN_IF_ERROR(io::RemoveTempFilesOnSignal());
    GRIDFEED_ASSIGN_OR_RETURN(text::PrepStats s, text::RunPrep(*opt));
    std::printf(
        "prep: %lld documents, %lld sequences, %llu tokens (%s) from %lld lines in %.2f s "
        "(%.0f documents/s, %.3g tokens/s)%s -> %s.{bin,idx}\n",
        static_cast<long long>(s.documents), static_cast<long long>(s.sequences),
        static_cast<unsigned long long>(s.tokens), std::string(io::DTypeName(s.dtype)).c_str(),
        static_cast<long long>(s.lines), s.seconds, s.documents / std::max(s.seconds, 1e-9),
        s.tokens / std::max(s.seconds, 1e-9),
        s.skipped_lines ? (", skipped " + std::to_string(s.skipped_lines) +
                           " bad lines; first: " + s.first_skipped)
                              .c_str()
                        : "",
        opt->output_prefix.c_str());
    return Status::Ok();
  };
}

}  // namespace gridfeed::app
