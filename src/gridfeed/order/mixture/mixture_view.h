// A mixture schedule's view of Megatron-format tables (mixture_pipeline.h): Megatron's view,
// whose blend sources are (stage length, source) pairs, with the schedule's stage and source
// names on its records and source ids. Owns the inner view when built over an image; thread
// safe as OrderView says.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/mixture/mixture_pipeline.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::order {

// Adds the stage names and per-source names to Megatron's view of the tables, whose blend
// sources are (stage length, source) pairs: records and source ids name the schedule's source.
class MixtureView final : public OrderView {
 public:
  MixtureView(OrderView* inner, std::unique_ptr<OrderView> owned, MixtureLayout layout)
      : inner_(inner), owned_(std::move(owned)), layout_(std::move(layout)) {
    mids_ = inner_->Sources(Split::kTrain);
    for (const auto& m : mids_) {
      int k = 0;  // every mid is a source's path (the image was checked against the layout)
      for (size_t j = 0; j < layout_.schedule.sources.size(); ++j) {
        if (layout_.schedule.sources[j].path == m.name) k = static_cast<int>(j);
      }
      source_of_mid_.push_back(k);
    }
  }
  // Whether every table is one of the schedule's sources at one of its stage lengths.
  bool MatchesLayout() const {
    for (size_t m = 0; m < mids_.size(); ++m) {
      const auto& path = layout_.schedule.sources[static_cast<size_t>(source_of_mid_[m])].path;
      const int64_t len = mids_[m].seq_length ? mids_[m].seq_length : layout_.seq_length;
      if (path != mids_[m].name ||
          std::find(layout_.stage_seq_length.begin(), layout_.stage_seq_length.end(), len) ==
              layout_.stage_seq_length.end()) {
        return false;
      }
    }
    return true;
  }

  int64_t length(Split s) const override { return inner_->length(s); }
  const std::vector<std::string>& token_stores() const override { return inner_->token_stores(); }
  std::vector<std::string> TokenFiles() const override { return inner_->TokenFiles(); }
  Status OpenTokenStores(bool checked_on_node) override {
    return inner_->OpenTokenStores(checked_on_node);
  }
  void AdoptTokenStores(const OpenStores& stores) override { inner_->AdoptTokenStores(stores); }
  std::vector<StoreFacts> TokenStoreFacts(uint64_t salt) const override {
    return inner_->TokenStoreFacts(salt);
  }
  std::vector<StoreFacts> FactsOfRank0Files(
      uint64_t salt, const std::vector<StoreFacts>& reference) const override {
    return inner_->FactsOfRank0Files(salt, reference);
  }
  SampleRecord Read(Split s, int64_t position, Sample* out, bool hash_tokens) const override {
    return Named(inner_->Read(s, position, out, hash_tokens));
  }
  SampleRecord ReadFields(Split s, int64_t position, const FieldTargets& out, bool hash_tokens,
                          AssemblyScratch* scratch) const override {
    return Named(inner_->ReadFields(s, position, out, hash_tokens, scratch));
  }
  std::string DescribeCursor(Split s, int64_t consumed) const override {
    if (s != Split::kTrain) return {};
    const int stage = layout_.StageAt(consumed);
    const auto st = static_cast<size_t>(stage);
    return nlohmann::json{{"pipeline", "mixture"},
                          {"stage", layout_.schedule.stages[st].name},
                          {"stage_index", stage},
                          {"stage_begin", layout_.stage_begin[st]},
                          {"stage_end", layout_.stage_begin[st + 1]},
                          {"consumed", consumed}}
        .dump();
  }
  bool is_blend(Split s) const override { return inner_->is_blend(s); }
  int SourceOf(Split s, int64_t position) const override {
    const int m = inner_->SourceOf(s, position);
    return s == Split::kTrain ? source_of_mid_[static_cast<size_t>(m)] : m;
  }
  // One per schedule source: its weight over every length, its epoch and length from the
  // first table of it (the run's --seq-length when a stage reads it there).
  std::vector<SourceInfo> Sources(Split s) const override {
    if (s != Split::kTrain) return inner_->Sources(s);
    SourceInfo none;
    none.weight = 0;  // a source no stage draws from has no table
    std::vector<SourceInfo> out(layout_.schedule.sources.size(), none);
    std::vector<char> seen(out.size(), 0);
    for (size_t m = 0; m < mids_.size(); ++m) {
      const auto k = static_cast<size_t>(source_of_mid_[m]);
      const bool better = !seen[k] || (out[k].seq_length != 0 && mids_[m].seq_length == 0);
      const double w = out[k].weight;
      if (better) out[k] = mids_[m];
      out[k].weight = seen[k] ? w + mids_[m].weight : mids_[m].weight;
      seen[k] = 1;
    }
    for (size_t k = 0; k < out.size(); ++k) out[k].name = layout_.schedule.sources[k].name;
    return out;
  }

 private:
  SampleRecord Named(SampleRecord r) const {
    r.dataset = source_of_mid_[static_cast<size_t>(r.dataset)];
    return r;
  }

  OrderView* inner_;
  std::unique_ptr<OrderView> owned_;
  MixtureLayout layout_;
  std::vector<SourceInfo> mids_;    // the tables' sources: (source, stage length) pairs
  std::vector<int> source_of_mid_;  // the schedule's source of each
};

}  // namespace gridfeed::order
