// gridfeed inspect: summary of a .bin/.idx pair, as text or JSON, and table dumps; with
// --per-dataset-sequences-out, Megatron's --per-dataset-sequences-path file for a blend's
// prefixes (config/data_args.h).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <variant>
#include <vector>

#include "commands.h"
#include "gridfeed/config/data_args.h"
#include "gridfeed/config/options.h"
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
  config::JobOptions lists;  // the data-path rows only
};

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

Status RunInspect(const InspectArgs& a) {
  if (!a.sequences_out.empty()) return WriteSequencesPerDataset(a);
  if (a.prefix.empty()) {
    return InvalidArgument("inspect needs a PREFIX (or --per-dataset-sequences-out FILE)");
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
  // The list flags of the option table, as their rows describe them.
  for (const char* name : {"data-path", "train-data-path", "valid-data-path", "test-data-path",
                           "data-args-path", "per-split-data-args-path"}) {
    const config::OptionRow* row = config::FindRow(name);
    std::visit(
        [&](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                        std::is_same_v<T, std::string>) {
            sub->add_option(row->flag(), *field, row->help);
          }
        },
        row->field(a->lists));
  }
  return [a] { return RunInspect(*a); };
}

}  // namespace gridfeed::app
