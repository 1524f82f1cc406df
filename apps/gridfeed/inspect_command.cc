// gridfeed inspect: summary of a .bin/.idx pair, as text or JSON, and table dumps; with
// --per-dataset-sequences-out, Megatron's --per-dataset-sequences-path file for a blend's
// prefixes (config/data_args.h). With tokenizer flags (--tokenizer-model, --tokenizer-type, ...),
// or given a tokenizer folder or file alone, it says which tokenizer that is and, for a store,
// whether its ids fit it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <variant>
#include <vector>

#include "commands.h"
#include "gridfeed/config/data_args.h"
#include "gridfeed/config/options.h"
#include "gridfeed/config/tokenizer_options.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/split.h"

namespace gridfeed::app {
namespace {

struct InspectArgs {
  std::string prefix;
  bool json = false;
  bool multimodal = false;
  std::string dump_dir;
  // Megatron's --per-dataset-sequences-path file for the prefixes of these lists.
  std::string sequences_out;
  config::JobOptions lists;  // the data-path rows and the tokenizer rows only
};

// A positional argument that names a tokenizer rather than a store: a folder holding
// tokenizer.json or gf_tokenizer.json, or a file where PREFIX.idx is not.
bool IsTokenizerPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return fs::exists(fs::path(path) / "tokenizer.json", ec) ||
           fs::exists(fs::path(path) / "gf_tokenizer.json", ec);
  }
  return fs::is_regular_file(path, ec) && !fs::exists(path + ".idx", ec);
}

// The spelling of a special id (the tokenizer's all_special_tokens), else empty.
std::string NameOf(const text::TextTokenizer& t, int64_t id) {
  for (const auto& s : t.special_tokens()) {
    if (s.id == id) return s.name;
  }
  return "";
}

nlohmann::json TokenizerJson(const text::TextTokenizer& t) {
  nlohmann::json j = {{"kind", t.kind()},
                      {"file", t.path()},
                      {"len", t.vocab_size()},
                      {"special_tokens", t.special_tokens().size()},
                      {"chat_template", t.chat_template().has_value()}};
  const std::pair<const char*, std::optional<int64_t>> named[] = {
      {"bos", t.bos_id()}, {"eos", t.eos_id()}, {"pad", t.pad_id()}, {"unk", t.unk_id()}};
  for (const auto& [key, id] : named) {
    j[key] = id ? nlohmann::json{{"token", NameOf(t, *id)}, {"id", *id}} : nlohmann::json();
  }
  return j;
}

void PrintTokenizer(const nlohmann::json& j) {
  std::printf("tokenizer %s\n  kind       %s\n  len        %lld (vocabulary and added tokens)\n",
              j["file"].get<std::string>().c_str(), j["kind"].get<std::string>().c_str(),
              static_cast<long long>(j["len"].get<int64_t>()));
  for (const char* key : {"bos", "eos", "pad", "unk"}) {
    const auto& v = j[key];
    if (v.is_null()) {
      std::printf("  %-10s none\n", key);
    } else {
      std::printf("  %-10s %s (%lld)\n", key, v["token"].get<std::string>().c_str(),
                  static_cast<long long>(v["id"].get<int64_t>()));
    }
  }
  std::printf("  specials   %zu\n  chat       %s\n", j["special_tokens"].get<size_t>(),
              j["chat_template"].get<bool>() ? "chat_template present" : "no chat_template");
}

// Every prefix of the lists once, in order (the blend's, then train, valid, test), as
// Megatron's tools/build_sequences_per_dataset.py collects them.
Result<std::vector<std::string>> ListedPrefixes(const config::DataOptions& d) {
  std::vector<std::string> prefixes;
  std::set<std::string> seen;
  const std::pair<const char*, const std::vector<std::string>*> lists[] = {
      {"--data-path", &d.data_path},
      {"--train-data-path", &d.train_data_path},
      {"--valid-data-path", &d.valid_data_path},
      {"--test-data-path", &d.test_data_path}};
  for (const auto& [flag, list] : lists) {
    if (list->empty()) continue;
    auto blend = order::ParseDataPath(*list);
    if (!blend.ok()) return blend.status().WithContext(flag);
    for (const auto& p : blend->prefixes) {
      if (seen.insert(p).second) prefixes.push_back(p);
    }
  }
  return prefixes;
}

Status WriteSequencesPerDataset(const InspectArgs& a) {
  if (!a.prefix.empty()) {
    return InvalidArgument(
        "inspect --per-dataset-sequences-out takes its prefixes from "
        "--data-path (or the other list flags), not '" +
        a.prefix + "'");
  }
  config::JobOptions o = a.lists;
  GRIDFEED_RETURN_IF_ERROR(config::LoadDataArgFiles(&o));
  GRIDFEED_ASSIGN_OR_RETURN(const std::vector<std::string> prefixes, ListedPrefixes(o.data));
  if (prefixes.empty()) {
    return InvalidArgument(
        "inspect --per-dataset-sequences-out needs prefixes: give --data-path, "
        "--data-args-path, --train/valid/test-data-path or --per-split-data-args-path");
  }
  std::vector<std::pair<std::string, std::array<int64_t, 2>>> counts;
  for (const auto& p : prefixes) {
    GRIDFEED_ASSIGN_OR_RETURN(io::IndexedDataset ds,
                              io::IndexedDataset::Open(p, false, io::IndexCheck::kStructure));
    // The header's counts: document_indices entries are documents + 1.
    counts.push_back({p, {ds.num_sequences(), ds.num_documents() + 1}});
  }
  GRIDFEED_RETURN_IF_ERROR(
      io::WriteStringToFile(a.sequences_out, config::PerDatasetSequencesJson(counts)));
  std::printf("%zu datasets: %s\n", counts.size(), a.sequences_out.c_str());
  return Status::Ok();
}

Status RunInspect(InspectArgs a) {
  if (!a.sequences_out.empty()) return WriteSequencesPerDataset(a);
  config::DataOptions& d = a.lists.data;
  if (!a.prefix.empty() && !config::HasTokenizer(d) && IsTokenizerPath(a.prefix)) {
    d.tokenizer_model = a.prefix;  // `gridfeed inspect FOLDER`: the tokenizer alone
    a.prefix.clear();
  }
  std::optional<nlohmann::json> tok;
  int64_t tok_len = 0;
  if (config::HasTokenizer(d)) {
    GRIDFEED_ASSIGN_OR_RETURN(config::DataTokenizer t, config::LoadDataTokenizer(d));
    tok = TokenizerJson(*t.tokenizer);
    tok_len = t.tokenizer->vocab_size();
  }
  if (a.prefix.empty()) {
    if (!tok) {
      return InvalidArgument(
          "inspect needs a PREFIX, a tokenizer (--tokenizer-model, --tokenizer-type), or "
          "--per-dataset-sequences-out FILE");
    }
    if (a.json) {
      std::printf("%s\n", nlohmann::json{{"tokenizer", *tok}}.dump(2).c_str());
    } else {
      PrintTokenizer(*tok);
    }
    return Status::Ok();
  }
  GRIDFEED_ASSIGN_OR_RETURN(io::IndexedDataset ds,
                            io::IndexedDataset::Open(a.prefix, a.multimodal));
  std::vector<int32_t> lengths = ds.sequence_lengths().ToVector();
  std::vector<int32_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  const bool empty = sorted.empty();
  const int64_t min_len = empty ? 0 : sorted.front();
  const int64_t max_len = empty ? 0 : sorted.back();
  // numpy's median: mean of the two middle values for an even count.
  double median = 0;
  if (!empty) {
    size_t n = sorted.size();
    median = n % 2 ? sorted[n / 2] : (double(sorted[n / 2 - 1]) + sorted[n / 2]) / 2;
  }
  // With a tokenizer: the store's largest id, against len(tokenizer).
  int64_t max_id = -1;
  if (tok) {
    for (int64_t i = 0; i < ds.num_sequences(); ++i) {
      GRIDFEED_ASSIGN_OR_RETURN(io::TokenSpan span, ds.Get(i));
      for (int64_t k = 0; k < span.length_tokens; ++k) max_id = std::max(max_id, span[k]);
    }
  }
  if (a.json) {
    nlohmann::json j = {{"prefix", a.prefix},
                        {"dtype", io::DTypeName(ds.dtype())},
                        {"dtype_code", static_cast<int>(ds.dtype())},
                        {"sequences", ds.num_sequences()},
                        {"documents", ds.num_documents()},
                        {"tokens", ds.num_tokens()},
                        {"min_sequence_length", min_len},
                        {"median_sequence_length", median},
                        {"max_sequence_length", max_len}};
    if (tok) {
      j["tokenizer"] = *tok;
      j["max_token_id"] = max_id;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "%s\n  dtype      %s (code %d)\n  sequences  %lld\n  documents  %lld\n  tokens     %llu\n"
        "  length     min %lld / median %g / max %lld tokens\n",
        a.prefix.c_str(), std::string(io::DTypeName(ds.dtype())).c_str(),
        static_cast<int>(ds.dtype()), static_cast<long long>(ds.num_sequences()),
        static_cast<long long>(ds.num_documents()),
        static_cast<unsigned long long>(ds.num_tokens()), static_cast<long long>(min_len), median,
        static_cast<long long>(max_len));
    if (tok) {
      PrintTokenizer(*tok);
      std::printf("  store ids  max %lld: %s\n", static_cast<long long>(max_id),
                  max_id < tok_len ? "every id is a token of this tokenizer"
                                   : "ids beyond len(tokenizer): another tokenizer made it");
    }
  }
  if (!a.dump_dir.empty()) {
    GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(a.dump_dir));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(a.dump_dir + "/lengths.npy", lengths));
    GRIDFEED_RETURN_IF_ERROR(
        io::WriteNpy(a.dump_dir + "/pointers.npy", ds.sequence_pointers().ToVector()));
    GRIDFEED_RETURN_IF_ERROR(
        io::WriteNpy(a.dump_dir + "/document_indices.npy", ds.document_indices().ToVector()));
  }
  return Status::Ok();
}

}  // namespace

Runner RegisterInspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect",
      "Summarise a .bin/.idx token store, or write Megatron's --per-dataset-sequences-path file");
  sub->add_option("prefix", a->prefix, "Path prefix of PREFIX.bin / PREFIX.idx");
  sub->add_flag("--json", a->json, "Print a JSON object");
  sub->add_flag("--multimodal", a->multimodal, "The index has a sequence_modes section");
  sub->add_option("--dump", a->dump_dir,
                  "Write lengths.npy, pointers.npy, document_indices.npy into DIR");
  sub->add_option("--per-dataset-sequences-out", a->sequences_out,
                  "Write {PREFIX: [sequence count, document count]} for the prefixes of the "
                  "list flags (Megatron's --per-dataset-sequences-path file)");
  // The list flags and the tokenizer flags of the option table, as their rows describe them.
  for (const char* name :
       {"data-path", "train-data-path", "valid-data-path", "test-data-path", "data-args-path",
        "per-split-data-args-path", "tokenizer-model", "tokenizer-type", "vocab-file", "merge-file",
        "tiktoken-pattern", "tiktoken-num-special-tokens", "tokenizer-special-tokens",
        "special-tokens", "vocab-size"}) {
    const config::OptionRow* row = config::FindRow(name);
    std::visit(
        [&](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                        std::is_same_v<T, std::string> || std::is_same_v<T, int64_t>) {
            sub->add_option(row->flag(), *field, row->help);
          }
        },
        row->field(a->lists));
  }
  return [a] { return RunInspect(*a); };
}

}  // namespace gridfeed::app
