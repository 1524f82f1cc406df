#include "gridfeed/order/node_image.h"

#include <cstdint>
#include <limits>

#include "gridfeed/order/table_image.h"
#include "gridfeed/order/table_view.h"

namespace gridfeed::order {
namespace {

// One source's held samples, appended in the order of the node's positions.
void Append(const GptTablesView& whole, int64_t j, HeldSource* h) {
  const int64_t row = whole.ShuffleAt(j);
  const int64_t d0 = whole.SampleDoc(row), d1 = whole.SampleDoc(row + 1);
  for (int64_t d = d0; d <= d1; ++d) {
    h->document_index.push_back(whole.document_index[static_cast<size_t>(d)]);
  }
  // Offsets lie inside one sequence, whose length is an int32.
  h->start_offset.push_back(static_cast<int32_t>(whole.SampleOffset(row)));
  h->end_offset.push_back(static_cast<int32_t>(whole.SampleOffset(row + 1)));
  h->first_doc64.push_back(static_cast<int64_t>(h->document_index.size()));
}

// Where sample-index row `row` lies, for a prefetch.
const void* RowAddress(const GptTablesView& t, int64_t row) {
  return t.sample_index64.empty() ? static_cast<const void*>(t.sample_index32.data() + 2 * row)
                                  : static_cast<const void*>(t.sample_index64.data() + 2 * row);
}

}  // namespace

Result<std::unique_ptr<ImageWriter>> NodeImageOf(const BuiltDatasets& built, Split split,
                                                 std::vector<int64_t> held,
                                                 bool keep_source_index) {
  const int i = static_cast<int>(split);
  if (!built.splits[i]) return InvalidArgument("node image: the split is absent");
  const SplitDataset& sd = *built.splits[i];
  const TableView whole = ViewOf(built);
  const SplitView& v = *whole.splits[i];
  HeldPositions extra;
  extra.split = split;
  extra.prefixes = whole.prefixes;
  extra.run_index.push_back(0);
  for (size_t n = 0; n < held.size(); ++n) {
    if (held[n] < 0 || held[n] >= v.length || (n > 0 && held[n] <= held[n - 1])) {
      return InvalidArgument("node image: held position " + std::to_string(held[n]) +
                             " is out of order or outside the split of " +
                             std::to_string(v.length));
    }
    if (n == 0 || held[n] != held[n - 1] + 1) {
      if (n > 0) extra.run_index.push_back(static_cast<int64_t>(n));
      extra.run_begin.push_back(held[n]);
    }
  }
  if (!held.empty()) extra.run_index.push_back(static_cast<int64_t>(held.size()));
  extra.sources.resize(sd.mids.size());
  for (auto& h : extra.sources) h.first_doc64.push_back(0);
  SplitDataset out;
  out.blended = sd.blended;
  out.weights = sd.weights;
  out.size = sd.size;
  out.length = sd.length;
  // Held samples lie at random rows of the whole tables: the rows of the sample 16 ahead and
  // the documents of the one 8 ahead are fetched while this one is copied (a miss each).
  constexpr size_t kRowsAhead = 16, kDocsAhead = 8;
  for (size_t n = 0; n < held.size(); ++n) {
    if (n + kRowsAhead < held.size()) {
      const auto [k2, j2] = v.Locate(held[n + kRowsAhead]);
      const GptTablesView& t2 = v.sources[k2].tables;
      __builtin_prefetch(RowAddress(t2, t2.ShuffleAt(j2)));
    }
    if (n + kDocsAhead < held.size()) {
      const auto [k3, j3] = v.Locate(held[n + kDocsAhead]);
      const GptTablesView& t3 = v.sources[k3].tables;
      __builtin_prefetch(t3.document_index.data() + t3.SampleDoc(t3.ShuffleAt(j3)));
    }
    const auto [k, j] = v.Locate(held[n]);
    HeldSource& h = extra.sources[static_cast<size_t>(k)];
    const auto m = static_cast<int64_t>(h.start_offset.size());
    Append(v.sources[k].tables, j, &h);
    if (sd.blended) {
      out.blend.dataset_index.push_back(k);
      out.blend.dataset_sample_index.push_back(m);
      extra.held_sample.push_back(j);
    }
  }
  // 32-bit document starts where they fit (most nodes): 4 bytes a sample less.
  for (auto& h : extra.sources) {
    if (h.document_index.size() < size_t{std::numeric_limits<int32_t>::max()}) {
      h.first_doc32.assign(h.first_doc64.begin(), h.first_doc64.end());
      h.first_doc64 = {};
    }
  }
  for (const MidDataset& w : sd.mids) {
    MidDataset m;
    m.prefix = w.prefix;
    m.split = w.split;
    m.begin = w.begin;
    m.end = w.end;
    m.num_samples_requested = w.num_samples_requested;
    m.seq_length = w.seq_length;
    m.tables.num_samples_per_epoch = w.tables.num_samples_per_epoch;
    m.dataset = w.dataset;
    out.mids.push_back(std::move(m));
  }
  if (keep_source_index && sd.blended) {
    extra.source_index.assign(v.dataset_index.begin(), v.dataset_index.end());
  }
  BuiltDatasets node;
  node.splits[i] = std::move(out);
  node.split_matrix = built.split_matrix;
  node.pad_id_used = built.pad_id_used;
  return std::unique_ptr<ImageWriter>(TableImageWriter::Create(std::move(node), std::move(extra)));
}

}  // namespace gridfeed::order
