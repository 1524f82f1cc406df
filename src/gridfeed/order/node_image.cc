#include "gridfeed/order/node_image.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "gridfeed/order/table_image.h"
#include "gridfeed/order/table_view.h"

namespace gridfeed::order {
namespace {

// One source's held samples, appended in the order of the node's positions.
void Append(const GptTablesView& whole, int64_t j, bool first_doc32, HeldSource* h) {
  const int64_t row = whole.ShuffleAt(j);
  const int64_t d0 = whole.SampleDoc(row), d1 = whole.SampleDoc(row + 1);
  for (int64_t d = d0; d <= d1; ++d) {
    h->document_index.push_back(whole.document_index[static_cast<size_t>(d)]);
  }
  // Offsets lie inside one sequence, whose length is an int32.
  h->start_offset.push_back(static_cast<int32_t>(whole.SampleOffset(row)));
  h->end_offset.push_back(static_cast<int32_t>(whole.SampleOffset(row + 1)));
  const auto docs = static_cast<int64_t>(h->document_index.size());
  if (first_doc32) {
    h->first_doc32.push_back(static_cast<int32_t>(docs));
  } else {
    h->first_doc64.push_back(docs);
  }
}

// Room for `count` held samples of `whole` in `h`, so the appends neither copy nor fault in
// grown storage (fresh pages are what a node image costs most); true when the document starts
// surely fit 32 bits. A held sample spans its sample-index rows' documents, and the samples of
// a table together span at most its documents plus one per sample.
bool Reserve(const GptTablesView& whole, int64_t count, HeldSource* h) {
  const auto samples = std::max<int64_t>(whole.num_samples(), 1);
  const auto all_docs = static_cast<int64_t>(whole.document_index.size()) + samples;
  const int64_t docs = std::min(all_docs, count * ((all_docs + samples - 1) / samples + 1) + 1024);
  h->document_index.reserve(static_cast<size_t>(docs));
  h->start_offset.reserve(static_cast<size_t>(count));
  h->end_offset.reserve(static_cast<size_t>(count));
  const bool small = all_docs < int64_t{std::numeric_limits<int32_t>::max()};
  if (small) {
    h->first_doc32.reserve(static_cast<size_t>(count) + 1);
    h->first_doc32.push_back(0);
  } else {
    h->first_doc64.reserve(static_cast<size_t>(count) + 1);
    h->first_doc64.push_back(0);
  }
  return small;
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
  size_t runs = 0;
  for (size_t n = 0; n < held.size(); ++n) runs += n == 0 || held[n] != held[n - 1] + 1;
  extra.run_begin.reserve(runs);
  extra.run_index.reserve(runs + 1);
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
  std::vector<int64_t> held_of(sd.mids.size(), 0);
  for (int64_t p : held) ++held_of[static_cast<size_t>(v.Locate(p).first)];
  std::vector<char> first_doc32(sd.mids.size());
  for (size_t k = 0; k < sd.mids.size(); ++k) {
    first_doc32[k] = Reserve(v.sources[k].tables, held_of[k], &extra.sources[k]);
  }
  SplitDataset out;
  out.blended = sd.blended;
  out.weights = sd.weights;
  out.size = sd.size;
  out.length = sd.length;
  if (sd.blended) {
    out.blend.dataset_index.reserve(held.size());
    out.blend.dataset_sample_index.reserve(held.size());
    extra.held_sample.reserve(held.size());
  }
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
    Append(v.sources[k].tables, j, first_doc32[static_cast<size_t>(k)] != 0, &h);
    if (sd.blended) {
      out.blend.dataset_index.push_back(k);
      out.blend.dataset_sample_index.push_back(m);
      extra.held_sample.push_back(j);
    }
  }
  // 32-bit document starts where they fit (most nodes): 4 bytes a sample less.
  for (auto& h : extra.sources) {
    if (!h.first_doc64.empty() &&
        h.document_index.size() < size_t{std::numeric_limits<int32_t>::max()}) {
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
