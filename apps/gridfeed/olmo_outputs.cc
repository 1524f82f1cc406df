#include "olmo_outputs.h"

#include <cstdio>
#include <sstream>

#include "gridfeed/core/parse.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/olmo/olmo_outputs.h"

namespace gridfeed::app {
namespace {

// "A:B" (B exclusive) or single indices (negative: from the end, as OLMo's dataset[i]); at
// most 2^24 of them (bounds are checked by ReadOlmoItems before any read).
Result<std::vector<int64_t>> ParseInstances(const std::string& spec) {
  std::vector<int64_t> out;
  std::stringstream ss(spec);
  std::string part;
  auto num = [](const std::string& s) -> Result<int64_t> {
    const auto v = ParseInt64(s);
    if (!v) return InvalidArgument("--positions: '" + s + "' is not an integer");
    return *v;
  };
  while (std::getline(ss, part, ',')) {
    const size_t colon = part.find(':');
    if (colon == std::string::npos) {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t a, num(part));
      out.push_back(a);
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t a, num(part.substr(0, colon)));
      GRIDFEED_ASSIGN_OR_RETURN(int64_t b, num(part.substr(colon + 1)));
      if (a < 0 || b <= a) return InvalidArgument("--positions: bad range '" + part + "'");
      if (b - a > (int64_t{1} << 24) - static_cast<int64_t>(out.size())) {
        return InvalidArgument("--positions: at most 2^24 instances");
      }
      for (int64_t v = a; v < b; ++v) out.push_back(v);
    }
    if (out.size() > (size_t{1} << 24)) return InvalidArgument("--positions: at most 2^24");
  }
  return out;
}

}  // namespace

Status WriteOlmoTables(const config::JobOptions& o, const std::string& out) {
  GRIDFEED_ASSIGN_OR_RETURN(order::OlmoTables t, order::BuildOlmoTables(o));
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(out));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/global_indices.npy", t.global_indices));
  GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(out + "/summary.json", t.summary_json + "\n"));
  std::printf("tables: wrote %s/global_indices.npy (%zu entries) and summary.json\n", out.c_str(),
              t.global_indices.size());
  return Status::Ok();
}

Status WriteOlmoSamples(const config::JobOptions& o, const std::string& spec,
                        const std::string& out) {
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<int64_t> indices, ParseInstances(spec));
  GRIDFEED_ASSIGN_OR_RETURN(order::OlmoItems it, order::ReadOlmoItems(o, indices));
  const int64_t n = static_cast<int64_t>(it.index.size()), L = it.seq_length;
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(out));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/index.npy", it.index));
  GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/input_ids.npy", it.input_ids, {n, L}));
  if (it.has_label_mask) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/label_mask.npy", it.label_mask, {n, L}));
  }
  if (it.has_attention_mask) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/attention_mask.npy", it.attention_mask, {n, L}));
  }
  if (it.has_instance_mask) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/instance_mask.npy", it.instance_mask));
  }
  if (it.has_doc_lens) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/doc_lens_flat.npy", it.doc_lens_flat));
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(out + "/doc_lens_offsets.npy", it.doc_lens_offsets));
  }
  GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(out + "/metadata.json", it.metadata_json + "\n"));
  std::printf("samples: wrote %lld OLMo instances to %s\n", static_cast<long long>(n), out.c_str());
  return Status::Ok();
}

}  // namespace gridfeed::app
