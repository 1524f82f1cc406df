#include "gridfeed/order/node_image.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "gridfeed/core/page_array.h"
#include "gridfeed/order/sections.h"
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

// The held samples of `held` (checked) of each source of split `v` into `sources`, in the order
// of the positions: of every source, or with `built_only` of those `sd` built (a producer's
// share). `first_doc32[k]`: source k's document starts are 32-bit.
void ExtractHeld(const SplitView& v, const SplitDataset& sd, std::span<const int64_t> held,
                 bool built_only, std::vector<HeldSource>* sources,
                 std::vector<char>* first_doc32) {
  const size_t n_sources = sd.mids.size();
  sources->assign(n_sources, {});
  first_doc32->assign(n_sources, 0);
  auto taken = [&](int k) { return !built_only || sd.mids[static_cast<size_t>(k)].dataset; };
  std::vector<int64_t> held_of(n_sources, 0);
  for (int64_t p : held) ++held_of[static_cast<size_t>(v.Locate(p).first)];
  for (size_t k = 0; k < n_sources; ++k) {
    if (taken(static_cast<int>(k))) {
      (*first_doc32)[k] = Reserve(v.sources[k].tables, held_of[k], &(*sources)[k]);
    }
  }
  // Held samples lie at random rows of the whole tables: the rows of the sample 16 ahead and
  // the documents of the one 8 ahead are fetched while this one is copied (a miss each).
  constexpr size_t kRowsAhead = 16, kDocsAhead = 8;
  for (size_t n = 0; n < held.size(); ++n) {
    if (n + kRowsAhead < held.size()) {
      const auto [k2, j2] = v.Locate(held[n + kRowsAhead]);
      const GptTablesView& t2 = v.sources[k2].tables;
      if (taken(k2)) __builtin_prefetch(RowAddress(t2, t2.ShuffleAt(j2)));
    }
    if (n + kDocsAhead < held.size()) {
      const auto [k3, j3] = v.Locate(held[n + kDocsAhead]);
      const GptTablesView& t3 = v.sources[k3].tables;
      if (taken(k3)) __builtin_prefetch(t3.document_index.data() + t3.SampleDoc(t3.ShuffleAt(j3)));
    }
    const auto [k, j] = v.Locate(held[n]);
    if (!taken(k)) continue;  // another producer's
    Append(v.sources[k].tables, j, (*first_doc32)[static_cast<size_t>(k)] != 0,
           &(*sources)[static_cast<size_t>(k)]);
  }
}

// Held positions sorted, unique and in a split of `length`; InvalidArgument otherwise.
Status CheckHeld(std::span<const int64_t> held, int64_t length) {
  for (size_t n = 0; n < held.size(); ++n) {
    if (held[n] < 0 || held[n] >= length || (n > 0 && held[n] <= held[n - 1])) {
      return InvalidArgument("node image: held position " + std::to_string(held[n]) +
                             " is out of order or outside the split of " + std::to_string(length));
    }
  }
  return Status::Ok();
}

// The node image of `held` (checked) of split `i` of `built`, from each source's held tables:
// the runs, the blend's rows of the held positions and the mids' facts are taken from `built`
// (whose tables themselves are not read).
std::unique_ptr<ImageWriter> Finish(const BuiltDatasets& built, int i, std::vector<int64_t> held,
                                    bool keep_source_index, std::vector<HeldSource> sources) {
  const SplitDataset& sd = *built.splits[i];
  const TableView whole = ViewOf(built);
  const SplitView& v = *whole.splits[i];
  HeldPositions extra;
  extra.split = static_cast<Split>(i);
  extra.prefixes = whole.prefixes;
  size_t runs = 0;
  for (size_t n = 0; n < held.size(); ++n) runs += n == 0 || held[n] != held[n - 1] + 1;
  extra.run_begin.reserve(runs);
  extra.run_index.reserve(runs + 1);
  extra.run_index.push_back(0);
  for (size_t n = 0; n < held.size(); ++n) {
    if (n == 0 || held[n] != held[n - 1] + 1) {
      if (n > 0) extra.run_index.push_back(static_cast<int64_t>(n));
      extra.run_begin.push_back(held[n]);
    }
  }
  if (!held.empty()) extra.run_index.push_back(static_cast<int64_t>(held.size()));
  SplitDataset out;
  out.blended = sd.blended;
  out.weights = sd.weights;
  out.size = sd.size;
  out.length = sd.length;
  if (sd.blended) {
    // A held position's row: its source, its place among the node's samples of that source, and
    // the source's own sample (what records name).
    out.blend.dataset_index.reserve(held.size());
    out.blend.dataset_sample_index.reserve(held.size());
    extra.held_sample.reserve(held.size());
    std::vector<int64_t> count(sd.mids.size(), 0);
    for (int64_t p : held) {
      const auto [k, j] = v.Locate(p);
      out.blend.dataset_index.push_back(k);
      out.blend.dataset_sample_index.push_back(count[static_cast<size_t>(k)]++);
      extra.held_sample.push_back(j);
    }
  }
  // 32-bit document starts where they fit (most nodes): 4 bytes a sample less.
  for (auto& h : sources) {
    if (!h.first_doc64.empty() &&
        h.document_index.size() < size_t{std::numeric_limits<int32_t>::max()}) {
      h.first_doc32.assign(h.first_doc64.begin(), h.first_doc64.end());
      h.first_doc64 = {};
    }
  }
  extra.sources = std::move(sources);
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

}  // namespace

Result<std::unique_ptr<ImageWriter>> NodeImageOf(const BuiltDatasets& built, Split split,
                                                 std::vector<int64_t> held,
                                                 bool keep_source_index) {
  const int i = static_cast<int>(split);
  if (!built.splits[i]) return InvalidArgument("node image: the split is absent");
  const SplitDataset& sd = *built.splits[i];
  const TableView whole = ViewOf(built);
  const SplitView& v = *whole.splits[i];
  GRIDFEED_RETURN_IF_ERROR(CheckHeld(held, v.length));
  std::vector<HeldSource> sources;
  std::vector<char> first_doc32;
  ExtractHeld(v, sd, held, /*built_only=*/false, &sources, &first_doc32);
  return Finish(built, i, std::move(held), keep_source_index, std::move(sources));
}

int Builders(std::span<const int> owner) {
  std::vector<int> sorted(owner.begin(), owner.end());
  std::sort(sorted.begin(), sorted.end());
  return static_cast<int>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
}

std::vector<int> PlanProducers(std::span<const uint64_t> costs, int producers) {
  producers = std::max(producers, 1);
  std::vector<size_t> by_cost(costs.size());
  for (size_t s = 0; s < costs.size(); ++s) by_cost[s] = s;
  std::stable_sort(by_cost.begin(), by_cost.end(),
                   [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<uint64_t> load(static_cast<size_t>(producers), 0);
  std::vector<int> owner(costs.size(), 0);
  for (size_t s : by_cost) {
    const auto least =
        static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[s] = static_cast<int>(least);
    load[least] += std::max<uint64_t>(costs[s], 1);
  }
  return owner;
}

std::vector<int64_t> OwnMidFacts(const BuiltDatasets& share) {
  std::vector<int64_t> facts;
  for (int i = 0; i < 3; ++i) {
    if (!share.splits[i]) continue;
    const auto& mids = share.splits[i]->mids;
    for (size_t k = 0; k < mids.size(); ++k) {
      if (!mids[k].dataset) continue;
      facts.insert(facts.end(), {i, static_cast<int64_t>(k), mids[k].begin, mids[k].end,
                                 mids[k].tables.num_samples_per_epoch});
    }
  }
  return facts;
}

Status AdoptMidFacts(std::span<const int64_t> facts, BuiltDatasets* share) {
  constexpr size_t kFields = 5;
  if (facts.size() % kFields != 0) return DataLoss("producers' mid facts: a partial entry");
  std::array<std::vector<int>, 3> given;
  for (int i = 0; i < 3; ++i) {
    if (share->splits[i]) given[i].assign(share->splits[i]->mids.size(), 0);
  }
  for (size_t e = 0; e < facts.size(); e += kFields) {
    const int64_t i = facts[e], k = facts[e + 1];
    if (i < 0 || i > 2 || !share->splits[i] || k < 0 ||
        k >= static_cast<int64_t>(given[i].size()) || given[i][k]++ > 0) {
      return DataLoss("producers' mid facts: split " + std::to_string(i) + " dataset " +
                      std::to_string(k) + " unknown or given twice");
    }
    MidDataset& m = share->splits[i]->mids[static_cast<size_t>(k)];
    if (m.dataset) continue;  // this producer's own
    m.begin = facts[e + 2];
    m.end = facts[e + 3];
    m.tables.num_samples_per_epoch = facts[e + 4];
  }
  for (int i = 0; i < 3; ++i) {
    for (size_t k = 0; k < given[i].size(); ++k) {
      if (given[i][k] == 0) {
        return DataLoss("no producer built dataset '" + share->splits[i]->mids[k].prefix +
                        "' of split " + kSplitNames[i]);
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<std::byte>> NodeSectionsOf(const BuiltDatasets& share, Split split,
                                              std::span<const int64_t> held, int producer) {
  const int i = static_cast<int>(split);
  if (!share.splits[i]) return InvalidArgument("node sections: the split is absent");
  const SplitDataset& sd = *share.splits[i];
  const TableView whole = ViewOf(share);
  const SplitView& v = *whole.splits[i];
  GRIDFEED_RETURN_IF_ERROR(CheckHeld(held, v.length));
  std::vector<HeldSource> sources;
  std::vector<char> first_doc32;
  ExtractHeld(v, sd, held, /*built_only=*/true, &sources, &first_doc32);
  SectionWriter out(producer);
  for (size_t k = 0; k < sd.mids.size(); ++k) {
    if (!sd.mids[k].dataset) continue;
    const HeldSource& h = sources[k];
    out.Begin();
    out.PutWord(k);
    out.PutWord(h.document_index.size());
    out.PutWord(h.start_offset.size());
    out.Put(std::span<const int32_t>(h.document_index));
    if (first_doc32[k]) {
      const std::vector<int64_t> wide(h.first_doc32.begin(), h.first_doc32.end());
      out.Put(std::span<const int64_t>(wide));
    } else {
      out.Put(std::span<const int64_t>(h.first_doc64));
    }
    out.Put(std::span<const int32_t>(h.start_offset));
    out.Put(std::span<const int32_t>(h.end_offset));
  }
  return std::move(out).Seal();
}

Result<std::unique_ptr<ImageWriter>> AssembleNodeImage(
    const BuiltDatasets& share, Split split, std::vector<int64_t> held, bool keep_source_index,
    std::vector<std::vector<std::byte>> sections) {
  const int i = static_cast<int>(split);
  if (!share.splits[i]) return InvalidArgument("node image: the split is absent");
  const SplitDataset& sd = *share.splits[i];
  const TableView whole = ViewOf(share);
  const SplitView& v = *whole.splits[i];
  GRIDFEED_RETURN_IF_ERROR(CheckHeld(held, v.length));
  std::vector<int64_t> held_of(sd.mids.size(), 0);
  for (int64_t p : held) ++held_of[static_cast<size_t>(v.Locate(p).first)];
  std::vector<HeldSource> sources(sd.mids.size());
  std::vector<int> from(sd.mids.size(), -1);
  for (size_t s = 0; s < sections.size(); ++s) {
    std::vector<std::byte> bytes = std::move(sections[s]);  // freed after this producer's
    GRIDFEED_ASSIGN_OR_RETURN(
        SectionReader r,
        SectionReader::Open(std::span<const std::byte>(bytes), static_cast<int>(s)));
    const std::string& who = r.who();
    for (uint64_t c = 0; c < r.count(); ++c) {
      uint64_t k = 0, docs = 0, samples = 0;
      if (!r.Word(&k) || !r.Word(&docs) || !r.Word(&samples)) return DataLoss(who + ": truncated");
      if (k >= sd.mids.size() || from[k] >= 0) {
        return DataLoss(who + ": source " + std::to_string(k) + " unknown or given twice");
      }
      from[k] = static_cast<int>(s);
      if (static_cast<int64_t>(samples) != held_of[k]) {
        return DataLoss(who + ": source " + std::to_string(k) + " ('" + sd.mids[k].prefix +
                        "') holds " + std::to_string(samples) + " of this node's samples, its " +
                        "blend gives it " + std::to_string(held_of[k]) + ": producers disagree");
      }
      HeldSource& h = sources[k];
      if (!r.Take(docs, &h.document_index) || !r.Take(samples + 1, &h.first_doc64) ||
          !r.Take(samples, &h.start_offset) || !r.Take(samples, &h.end_offset)) {
        return DataLoss(who + ": source " + std::to_string(k) + " is truncated");
      }
      if (h.first_doc64.front() != 0 || h.first_doc64.back() != static_cast<int64_t>(docs)) {
        return DataLoss(who + ": source " + std::to_string(k) + "'s document starts are bad");
      }
    }
    if (!r.done()) return DataLoss(who + ": bytes after the last section");
  }
  for (size_t k = 0; k < sd.mids.size(); ++k) {
    if (from[k] < 0) {
      return DataLoss("no producer gave the sections of source " + std::to_string(k) + " ('" +
                      sd.mids[k].prefix + "')");
    }
  }
  return Finish(share, i, std::move(held), keep_source_index, std::move(sources));
}

void ReleaseSourceTables(BuiltDatasets* share) {
  for (auto& split : share->splits) {
    if (!split) continue;
    for (auto& m : split->mids) {
      GptTables facts;  // the scalars stay: a node image names them
      facts.num_tokens_per_epoch = m.tables.num_tokens_per_epoch;
      facts.num_epochs = m.tables.num_epochs;
      facts.separate_final_epoch = m.tables.separate_final_epoch;
      facts.num_samples_per_epoch = m.tables.num_samples_per_epoch;
      facts.num_samples_sans_final_epoch = m.tables.num_samples_sans_final_epoch;
      m.tables = std::move(facts);
    }
  }
}

namespace {

// What a whole share's section says of its mid before its tables.
struct WholeHead {
  uint64_t split = 0, k = 0, tokens = 0, epochs = 0, separate = 0, sans_final = 0;
  uint64_t sample64 = 0, shuffle64 = 0, docs = 0, sample_entries = 0, samples = 0;
};

// Reads `count` values of T into a fresh PageArray (the tables' own kind of memory).
template <typename T>
bool TakePages(SectionReader& r, uint64_t count, PageArray<T>* out) {
  std::vector<T> values;
  if (!r.Take(count, &values)) return false;
  PageArray<T> pages(values.size());
  if (!values.empty()) std::memcpy(pages.data(), values.data(), values.size() * sizeof(T));
  *out = std::move(pages);
  return true;
}

// Whether the head's table lengths are those of mid `m` (its facts adopted): its epochs of its
// documents, the samples its tokens give at its length, Megatron's epoch count for the samples
// asked of it; empty when they are, else why not.
std::string WholeHeadMismatch(const WholeHead& h, const MidDataset& m, int64_t seq_length,
                              bool add_extra_token) {
  const int64_t S = m.seq_length > 0 ? m.seq_length : seq_length;
  const int64_t x = add_extra_token ? 1 : 0;
  const auto T = static_cast<int64_t>(h.tokens), E = static_cast<int64_t>(h.epochs);
  const int64_t n_seq = m.end - m.begin;
  if (S <= 0 || T < 0 || E < 1 || E > (int64_t{1} << 31) || n_seq < 0) return "bad scalars";
  if (h.docs != static_cast<uint64_t>(n_seq * E)) {
    return "a document index of " + std::to_string(h.docs) + " entries, its facts give " +
           std::to_string(n_seq) + " documents x " + std::to_string(E) + " epochs";
  }
  if ((T - x) / S != m.tables.num_samples_per_epoch) {
    return std::to_string(T) + " tokens per epoch, not its " +
           std::to_string(m.tables.num_samples_per_epoch) + " samples per epoch";
  }
  const int64_t want_epochs =
      !m.num_samples_requested
          ? 1
          : (T == 0 ? 1 : std::max<int64_t>(1, (*m.num_samples_requested * S + x + T - 1) / T));
  if (E != want_epochs) {
    return std::to_string(E) + " epochs, its facts need " + std::to_string(want_epochs);
  }
  const auto n = static_cast<uint64_t>(h.samples);
  const bool counted = n == static_cast<uint64_t>(SampleCount(E, T, S, true, add_extra_token)) ||
                       n == static_cast<uint64_t>(SampleCount(E, T, S, false, add_extra_token));
  if (!counted || h.sample_entries != 2 * (n + 1)) {
    return std::to_string(n) + " samples and " + std::to_string(h.sample_entries) +
           " sample-index entries, its tokens give another count";
  }
  if ((h.shuffle64 != 0) != (n >= uint64_t{0xffffffff} - 1) || h.separate > 1 ||
      (h.sample64 == 0 && h.docs > uint64_t{std::numeric_limits<int32_t>::max()})) {
    return "index widths that do not fit its sizes";
  }
  return {};
}

}  // namespace

Result<std::vector<std::byte>> WholeSectionsOf(const BuiltDatasets& share, int producer) {
  SectionWriter out(producer);
  for (int i = 0; i < 3; ++i) {
    if (!share.splits[i]) continue;
    const auto& mids = share.splits[i]->mids;
    for (size_t k = 0; k < mids.size(); ++k) {
      const MidDataset& m = mids[k];
      if (!m.dataset) continue;  // another producer's
      const GptTables& t = m.tables;
      if (t.contents_released) {
        return FailedPrecondition("whole sections: the tables of '" + m.prefix + "' were released");
      }
      out.Begin();
      const uint64_t sample_entries =
          t.sample_index_is_int64 ? t.sample_index64.size() : t.sample_index32.size();
      for (uint64_t w :
           {static_cast<uint64_t>(i), static_cast<uint64_t>(k),
            static_cast<uint64_t>(t.num_tokens_per_epoch), static_cast<uint64_t>(t.num_epochs),
            static_cast<uint64_t>(t.separate_final_epoch),
            static_cast<uint64_t>(t.num_samples_sans_final_epoch),
            static_cast<uint64_t>(t.sample_index_is_int64),
            static_cast<uint64_t>(t.shuffle_index_is_int64),
            static_cast<uint64_t>(t.document_index.size()), sample_entries,
            static_cast<uint64_t>(t.num_samples())}) {
        out.PutWord(w);
      }
      out.Put(std::span<const int32_t>(t.document_index.data(), t.document_index.size()));
      if (t.sample_index_is_int64) {
        out.Put(std::span<const int64_t>(t.sample_index64.data(), t.sample_index64.size()));
      } else {
        out.Put(std::span<const int32_t>(t.sample_index32.data(), t.sample_index32.size()));
      }
      if (t.shuffle_index_is_int64) {
        out.Put(std::span<const int64_t>(t.shuffle_index64.data(), t.shuffle_index64.size()));
      } else {
        out.Put(std::span<const uint32_t>(t.shuffle_index32.data(), t.shuffle_index32.size()));
      }
    }
  }
  return std::move(out).Seal();
}

Status AdoptWholeSections(std::vector<std::vector<std::byte>> sections, int64_t seq_length,
                          bool add_extra_token, BuiltDatasets* share) {
  std::array<std::vector<int>, 3> from;
  for (int i = 0; i < 3; ++i) {
    if (share->splits[i]) from[i].assign(share->splits[i]->mids.size(), -1);
  }
  for (size_t s = 0; s < sections.size(); ++s) {
    std::vector<std::byte> bytes = std::move(sections[s]);  // freed after this producer's
    GRIDFEED_ASSIGN_OR_RETURN(
        SectionReader r,
        SectionReader::Open(std::span<const std::byte>(bytes), static_cast<int>(s)));
    const std::string& who = r.who();
    for (uint64_t c = 0; c < r.count(); ++c) {
      WholeHead h;
      for (uint64_t* w : {&h.split, &h.k, &h.tokens, &h.epochs, &h.separate, &h.sans_final,
                          &h.sample64, &h.shuffle64, &h.docs, &h.sample_entries, &h.samples}) {
        if (!r.Word(w)) return DataLoss(who + ": truncated");
      }
      if (h.split > 2 || !share->splits[h.split] || h.k >= from[h.split].size() ||
          from[h.split][h.k] >= 0) {
        return DataLoss(who + ": split " + std::to_string(h.split) + " dataset " +
                        std::to_string(h.k) + " unknown or given twice");
      }
      from[h.split][h.k] = static_cast<int>(s);
      MidDataset& m = share->splits[h.split]->mids[h.k];
      const std::string mismatch = WholeHeadMismatch(h, m, seq_length, add_extra_token);
      if (!mismatch.empty()) {
        return DataLoss(who + ": dataset '" + m.prefix + "' of split " + kSplitNames[h.split] +
                        " has " + mismatch + ": producers disagree");
      }
      GptTables t;
      t.num_tokens_per_epoch = static_cast<int64_t>(h.tokens);
      t.num_epochs = static_cast<int64_t>(h.epochs);
      t.separate_final_epoch = h.separate != 0;
      t.num_samples_per_epoch = m.tables.num_samples_per_epoch;
      t.num_samples_sans_final_epoch = static_cast<int64_t>(h.sans_final);
      t.sample_index_is_int64 = h.sample64 != 0;
      t.shuffle_index_is_int64 = h.shuffle64 != 0;
      bool whole = TakePages(r, h.docs, &t.document_index);
      whole =
          whole && (t.sample_index_is_int64 ? TakePages(r, h.sample_entries, &t.sample_index64)
                                            : TakePages(r, h.sample_entries, &t.sample_index32));
      whole = whole && (t.shuffle_index_is_int64 ? TakePages(r, h.samples, &t.shuffle_index64)
                                                 : TakePages(r, h.samples, &t.shuffle_index32));
      if (!whole) {
        return DataLoss(who + ": the tables of dataset '" + m.prefix + "' are truncated");
      }
      m.tables = std::move(t);
    }
    if (!r.done()) return DataLoss(who + ": bytes after the last section");
  }
  for (int i = 0; i < 3; ++i) {
    for (size_t k = 0; k < from[i].size(); ++k) {
      if (from[i][k] < 0) {
        return DataLoss("no producer gave the tables of dataset '" +
                        share->splits[i]->mids[k].prefix + "' of split " + kSplitNames[i]);
      }
    }
  }
  return Status::Ok();
}

}  // namespace gridfeed::order
