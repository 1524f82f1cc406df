// gridfeed inspect: summary of a .bin/.idx pair, as text or JSON, and table dumps.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/io/npy.h"

namespace gridfeed::app {
namespace {

struct InspectArgs {
  std::string prefix;
  bool json = false;
  bool multimodal = false;
  std::string dump_dir;
};

Status RunInspect(const InspectArgs& a) {
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
  CLI::App* sub = app.add_subcommand("inspect", "Summarise a .bin/.idx token store");
  sub->add_option("prefix", a->prefix, "Path prefix of PREFIX.bin / PREFIX.idx")->required();
  sub->add_flag("--json", a->json, "Print a JSON object");
  sub->add_flag("--multimodal", a->multimodal, "The index has a sequence_modes section");
  sub->add_option("--dump", a->dump_dir,
                  "Write lengths.npy, pointers.npy, document_indices.npy into DIR");
  return [a] { return RunInspect(*a); };
}

}  // namespace gridfeed::app
