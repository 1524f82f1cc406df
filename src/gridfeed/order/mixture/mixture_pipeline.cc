#include "gridfeed/order/mixture/mixture_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "gridfeed/core/log.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/megatron/megatron_pipeline.h"
#include "gridfeed/order/mixture/mixture_view.h"
#include "gridfeed/order/mixture/order_prefix.h"
#include "gridfeed/order/split.h"
#include "gridfeed/order/table_image.h"

namespace gridfeed::order {
namespace {

// The mixture schedule a canonical text holds (empty: none).
std::string ScheduleOfCanonical(const std::string& canonical) {
  const auto j = nlohmann::json::parse(canonical, nullptr, false);
  if (!j.is_object() || !j.contains("mixture-schedule") || !j["mixture-schedule"].is_string()) {
    return "";
  }
  return j["mixture-schedule"].get<std::string>();
}

// `history` (a JSON list) with the schedule in force from `position` appended.
std::string ScheduleHistoryEntry(nlohmann::json history, int64_t position,
                                 const std::string& schedule) {
  history.push_back({{"position", position}, {"schedule", schedule}});
  return history.dump();
}

class MixtureBuilt final : public BuiltOrder {
 public:
  MixtureBuilt(std::unique_ptr<BuiltOrder> inner, MixtureLayout layout, std::string facts)
      : inner_(std::move(inner)), layout_(std::move(layout)), facts_(std::move(facts)) {
    Bind();
  }
  std::string DataFacts() const override { return facts_; }
  OrderView& view() override { return *view_; }
  OpenStores OpenedStores() const override { return inner_->OpenedStores(); }
  std::unique_ptr<ImageWriter> TakeImage() override {
    view_.reset();
    return inner_->TakeImage();
  }

  // A share of a whole-image build by several producers (MixturePipeline::BuildWholeShare):
  // the inner Megatron tables' (its facts are the inner ones and the schedule's, which every
  // producer resolves alike).
  std::vector<int64_t> ShareFacts() const override { return inner_->ShareFacts(); }
  Status AdoptShareFacts(std::span<const int64_t> facts) override {
    GRIDFEED_RETURN_IF_ERROR(inner_->AdoptShareFacts(facts));
    Bind();  // the inner view is a new one
    return Status::Ok();
  }
  void ReleaseShareTables() override {
    view_.reset();
    inner_->ReleaseShareTables();
  }
  Result<std::vector<std::byte>> WholeSections(int producer) const override {
    return inner_->WholeSections(producer);
  }
  Result<std::unique_ptr<ImageWriter>> AssembleWholeImage(
      std::vector<std::vector<std::byte>> sections) override {
    view_.reset();
    return inner_->AssembleWholeImage(std::move(sections));
  }

 private:
  void Bind() { view_ = std::make_unique<MixtureView>(&inner_->view(), nullptr, layout_); }

  std::unique_ptr<BuiltOrder> inner_;
  MixtureLayout layout_;
  std::unique_ptr<MixtureView> view_;
  std::string facts_;
};

std::string CapLine(const MixtureLayout& layout, const CapEvent& e, double epochs) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "mixture: source '%s' reached max_epochs %g (%lld samples) at position %lld "
                "(stage '%s'); its weight is 0 from there, the others renormalised",
                layout.schedule.sources[static_cast<size_t>(e.source)].name.c_str(), epochs,
                static_cast<long long>(e.samples), static_cast<long long>(e.position),
                layout.schedule.stages[static_cast<size_t>(e.stage)].name.c_str());
  return line;
}

// The sources' train parts (Megatron's --split arithmetic, legacy default included).
Result<SplitMatrix> MixtureSplit(const DatasetConfig& c) {
  const std::string split_text = c.split.value_or("969, 30, 1");
  if (!c.split) log::Warn("no --split given: using Megatron's legacy default \"969, 30, 1\"");
  GRIDFEED_ASSIGN_OR_RETURN(auto vec, ParseAndNormalizeSplit(split_text));
  const SplitMatrix matrix = SplitVectorToMatrix(vec);
  if (!matrix[0] || !std::isfinite(vec[0])) {
    return InvalidArgument("--split '" + split_text + "' leaves no train part for the mixture");
  }
  return matrix;
}

// A source's train tokens (what temperature weights use) and its cap in tokens (-1: none):
// max_epochs x its samples per epoch at --seq-length, in samples of --seq-length tokens.
std::pair<double, int64_t> SourceSize(const io::IndexedDataset& ds, int64_t begin, int64_t end,
                                      const DatasetConfig& c, double max_epochs) {
  const int64_t x = c.add_extra_token ? 1 : 0;
  const auto lengths = ds.sequence_lengths();
  int64_t t = 0;
  for (int64_t i = begin; i < end; ++i) t += lengths[static_cast<size_t>(i)];
  const int64_t per_epoch = std::max<int64_t>(0, (t - x) / c.seq_length);
  const double samples = std::floor(max_epochs * static_cast<double>(per_epoch));
  // A cap past every token a schedule can hold never binds.
  const bool binds =
      max_epochs > 0 && samples < static_cast<double>(kMaxMixtureTokens / c.seq_length);
  return {static_cast<double>(t), binds ? static_cast<int64_t>(samples) * c.seq_length : -1};
}

// A source without tokens in its train part cannot be read, whatever its weight (its tables
// need an epoch); the error says so instead of Megatron's empty-split one.
Status CheckNotEmpty(const config::MixtureSource& src, double tokens, int64_t begin, int64_t end,
                     const DatasetConfig& c) {
  if (tokens > 0) return Status::Ok();
  return InvalidArgument("mixture source '" + src.name + "' ('" + src.path +
                         "') has no tokens in its train part (sequences [" + std::to_string(begin) +
                         ", " + std::to_string(end) + ") under --split '" +
                         c.split.value_or("969, 30, 1") +
                         "'): a source needs data even with weight 0; drop it from sources or "
                         "give it data");
}

// The stages by length (in order of first use): per length and source, the samples the blend
// draws there and their target (the integral of the weights over those stages).
struct LengthGroups {
  std::vector<int64_t> length;
  std::vector<size_t> of_stage;
  std::vector<std::vector<int64_t>> draws;
  std::vector<std::vector<double>> target;
};

LengthGroups GroupByLength(const MixtureLayout& layout, const ScheduledBlend& blend) {
  LengthGroups out;
  for (int64_t len : layout.stage_seq_length) {
    const auto it = std::find(out.length.begin(), out.length.end(), len);
    out.of_stage.push_back(static_cast<size_t>(it - out.length.begin()));
    if (it == out.length.end()) out.length.push_back(len);
  }
  const size_t n = blend.counts.size();
  if (out.length.size() == 1) {  // Megatron's arithmetic exactly, as without stage lengths
    out.draws = {blend.counts};
    out.target = {blend.final_targets};
    return out;
  }
  out.draws.assign(out.length.size(), std::vector<int64_t>(n, 0));
  out.target.assign(out.length.size(), std::vector<double>(n, 0.0));
  for (size_t i = 0; i + 1 < layout.stage_begin.size(); ++i) {
    const size_t g = out.of_stage[i];
    const int64_t a = layout.stage_begin[i], b = layout.stage_begin[i + 1];
    for (int64_t p = a; p < b; ++p)
      ++out.draws[g][static_cast<size_t>(blend.tables.dataset_index[p])];
    for (size_t k = 0; k < n; ++k) {
      out.target[g][k] +=
          CumulativeTarget(blend.segments, k, b) - CumulativeTarget(blend.segments, k, a);
    }
  }
  return out;
}

// The blend's (source, its n-th sample) -> (table of the source at the position's length, its
// n-th sample): each length is its own stream of the source.
void RenumberByLength(const MixtureLayout& layout, const LengthGroups& groups,
                      const std::vector<std::vector<int32_t>>& mid_of, BlendTables* t) {
  std::vector<int64_t> next;
  for (const auto& row : mid_of) next.resize(next.size() + row.size(), 0);
  for (size_t i = 0; i + 1 < layout.stage_begin.size(); ++i) {
    const auto& row = mid_of[groups.of_stage[i]];
    for (int64_t p = layout.stage_begin[i]; p < layout.stage_begin[i + 1]; ++p) {
      const int32_t m = row[static_cast<size_t>(t->dataset_index[p])];
      t->dataset_index[p] = m;
      t->dataset_sample_index[p] = next[static_cast<size_t>(m)]++;
    }
  }
}

Result<DatasetConfig> MixtureDatasetConfigOf(const config::JobOptions& o) {
  config::DataOptions d = o.data;
  d.mixture_schedule.clear();
  return MegatronDatasetConfig(d);
}

class MixturePipeline final : public Pipeline {
 public:
  explicit MixturePipeline(const config::JobOptions& o) : options_(o) {}

  Result<std::unique_ptr<BuiltOrder>> Build() const override { return BuildOrShare(nullptr); }

  // Many producers of the whole image: the schedule's sources (distinct stores), each costing
  // its index bytes; none below two sources.
  Result<std::vector<uint64_t>> WholeShareUnits() const override {
    GRIDFEED_ASSIGN_OR_RETURN(config::MixtureSchedule schedule,
                              config::ParseMixtureSchedule(options_.data.mixture_schedule));
    std::vector<uint64_t> costs;
    if (schedule.sources.size() < 2) return costs;
    for (const auto& src : schedule.sources) {
      const auto bytes = io::FileSize(src.path + ".idx");  // a missing one fails every open
      costs.push_back(bytes.ok() ? static_cast<uint64_t>(*bytes) : 0);
    }
    return costs;
  }

  // Every producer resolves the scheduled blend (each source's train tokens, read from every
  // index), and builds the tables of its own sources only.
  Result<std::unique_ptr<BuiltOrder>> BuildWholeShare(
      const std::function<bool(size_t unit)>& builds_unit) const override {
    GRIDFEED_ASSIGN_OR_RETURN(std::vector<uint64_t> units, WholeShareUnits());
    if (units.empty()) {
      return FailedPrecondition("this order's whole image is not divided among producers");
    }
    return BuildOrShare(&builds_unit);
  }

 private:
  // The whole build, or (`builds_unit`: which sources are this producer's) one producer's
  // share: the others' sources are opened with a structure check only (the lengths give their
  // tokens; their owners check them in full) and their tables left to their owners (their
  // mids without a store, as DatasetConfig::builds_store leaves them).
  Result<std::unique_ptr<BuiltOrder>> BuildOrShare(
      const std::function<bool(size_t unit)>* builds_unit) const {
    auto owns = [builds_unit](size_t k) { return builds_unit == nullptr || (*builds_unit)(k); };
    // One producer speaks for a share's build: the owner of the first source.
    const bool speaks = owns(0);
    GRIDFEED_ASSIGN_OR_RETURN(MixtureLayout layout, LayoutMixture(options_));
    GRIDFEED_ASSIGN_OR_RETURN(DatasetConfig c, MixtureDatasetConfigOf(options_));
    const auto& sources = layout.schedule.sources;
    GRIDFEED_RETURN_IF_ERROR(CheckDistinctStores(layout.schedule));
    Stopwatch clock;
    GRIDFEED_ASSIGN_OR_RETURN(const SplitMatrix matrix, MixtureSplit(c));
    const auto& train = *matrix[0];
    SplitDataset sd;
    sd.blended = true;
    std::vector<double> tokens;
    std::vector<int64_t> caps;
    for (size_t k = 0; k < sources.size(); ++k) {
      auto ds = io::IndexedDataset::Open(
          sources[k].path, false, owns(k) ? io::IndexCheck::kFull : io::IndexCheck::kStructure);
      if (!ds.ok()) return ds.status().WithContext("mixture source '" + sources[k].name + "'");
      MidDataset m;
      m.prefix = sources[k].path;
      m.split = Split::kTrain;
      m.dataset = std::make_shared<const io::IndexedDataset>(std::move(ds).value());
      std::tie(m.begin, m.end) = BookendToRange(train, m.dataset->num_sequences());
      const auto [t, cap] =
          SourceSize(*m.dataset, m.begin, m.end, c, layout.schedule.max_epochs[k]);
      GRIDFEED_RETURN_IF_ERROR(CheckNotEmpty(sources[k], t, m.begin, m.end, c));
      tokens.push_back(t);
      caps.push_back(cap);
      sd.mids.push_back(std::move(m));
    }
    const double open_s = clock.Seconds();
    GRIDFEED_ASSIGN_OR_RETURN(ScheduledBlend blend,
                              BuildScheduledBlend(MixtureStages(layout, tokens), caps));
    const double blend_s = clock.Seconds() - open_s;
    for (const auto& e : blend.caps) {
      if (!speaks) continue;
      log::Info(CapLine(layout, e, layout.schedule.max_epochs[static_cast<size_t>(e.source)]));
    }
    const LengthGroups groups = GroupByLength(layout, blend);
    std::vector<MidDataset> opened = std::move(sd.mids);
    sd.mids.clear();
    // Each (length, source) table holds what the blend draws from it plus Megatron's surplus.
    std::vector<std::vector<int32_t>> mid_of(groups.length.size());
    std::vector<int64_t> mid_draws;
    for (size_t g = 0; g < groups.length.size(); ++g) {
      for (size_t k = 0; k < sources.size(); ++k) {
        mid_of[g].push_back(-1);
        if (groups.length.size() > 1 && groups.draws[g][k] == 0) continue;
        MidDataset m = opened[k];
        if (groups.length[g] != layout.seq_length) m.seq_length = groups.length[g];
        const double t = std::ceil(groups.target[g][k]);
        const auto asked = static_cast<int64_t>(std::ceil(t * (1.0 + c.mid_level_dataset_surplus)));
        m.num_samples_requested = std::max(asked, groups.draws[g][k]);
        if (!owns(k)) m.dataset = nullptr;  // another producer's tables
        mid_of[g][k] = static_cast<int32_t>(sd.mids.size());
        mid_draws.push_back(groups.draws[g][k]);
        sd.mids.push_back(std::move(m));
        sd.weights.push_back(groups.target[g][k] / static_cast<double>(layout.length));
      }
    }
    if (groups.length.size() > 1) RenumberByLength(layout, groups, mid_of, &blend.tables);
    sd.size = layout.length;
    sd.length = layout.length;
    sd.blend = std::move(blend.tables);
    BuiltDatasets built;
    built.splits[0] = std::move(sd);
    built.split_matrix = matrix;
    built.pad_id_used = PadIdUsed(c.pad_id, c.eod_id);
    GRIDFEED_RETURN_IF_ERROR(BuildMidTables(built.splits, c));
    for (size_t i = 0; i < mid_draws.size(); ++i) {
      const auto& m = built.splits[0]->mids[i];
      if (m.dataset && m.tables.num_samples() < mid_draws[i]) {  // else checked by its owner
        return FailedPrecondition("mixture source '" + m.prefix + "' at seq length " +
                                  std::to_string(m.seq_length ? m.seq_length : c.seq_length) +
                                  " has " + std::to_string(m.tables.num_samples()) +
                                  " samples, the schedule draws " + std::to_string(mid_draws[i]));
      }
    }
    char line[256];
    std::snprintf(line, sizeof(line),
                  "mixture order: %lld samples in %zu stage(s) over %zu source(s); open %.3f s, "
                  "blend %.3f s, tables %.3f s",
                  static_cast<long long>(layout.length), layout.schedule.stages.size(),
                  sources.size(), open_s, blend_s, clock.Seconds() - open_s - blend_s);
    if (speaks) log::Info(line);
    // The data facts: Megatron's (the stores; a share's own) and the resolved schedule.
    auto inner = MakeMegatronBuilt(std::move(built), MegatronSampleOptions(options_.data));
    nlohmann::json facts = nlohmann::json::parse(inner->DataFacts());
    nlohmann::json caps_json = nlohmann::json::array();
    for (const auto& e : blend.caps) {
      caps_json.push_back({{"source", e.source}, {"position", e.position}, {"samples", e.samples}});
    }
    facts["mixture"] = {{"stage_begin", layout.stage_begin},
                        {"ramp_samples", layout.ramp_samples},
                        {"counts", blend.counts},
                        {"caps", caps_json}};
    if (groups.length.size() > 1 || groups.length[0] != layout.seq_length) {
      facts["mixture"]["stage_seq_length"] = layout.stage_seq_length;
    }
    return std::unique_ptr<BuiltOrder>(
        std::make_unique<MixtureBuilt>(std::move(inner), std::move(layout), facts.dump()));
  }

 public:
  // A schedule may be amended on resume; its history says which was in force from where.
  FieldSchema schema() const override { return GptSchema(options_.data.create_attention_mask); }
  bool amendable() const override { return true; }

  std::string StartHistory(int64_t consumed) const override {
    return ScheduleHistoryEntry(nlohmann::json::array(), consumed, options_.data.mixture_schedule);
  }

  std::string ResumedHistory(const std::string& saved_history, const std::string& saved_canonical,
                             int64_t resumed_at, bool amended) const override {
    nlohmann::json history = nlohmann::json::parse(saved_history, nullptr, false);
    if (!history.is_array()) {  // saved before histories: its schedule from position 0
      history = nlohmann::json::parse(
          ScheduleHistoryEntry(nlohmann::json::array(), 0, ScheduleOfCanonical(saved_canonical)));
    }
    std::string out =
        amended ? ScheduleHistoryEntry(history, resumed_at, options_.data.mixture_schedule)
                : history.dump();
    if (amended) {
      log::Info("resuming with an amended mixture schedule from sample " +
                std::to_string(resumed_at) + " (the order before it is unchanged)");
    }
    return out;
  }

  // Rebuilds the saved order's (Megatron-format) tables and compares them with `image`
  // position by position; explains the usual cause of a difference.
  Status SamePast(const config::JobOptions& old, std::span<const std::byte> image,
                  int64_t consumed) const override {
    GRIDFEED_ASSIGN_OR_RETURN(auto old_pipeline, Pipeline::For(old));
    GRIDFEED_ASSIGN_OR_RETURN(auto old_built, old_pipeline->Build());
    auto writer = old_built->TakeImage();
    std::vector<std::byte> old_image(writer->size());
    writer->WriteTo(old_image.data());
    GRIDFEED_ASSIGN_OR_RETURN(TableView a, ParseTableImage(old_image));
    GRIDFEED_ASSIGN_OR_RETURN(TableView b, ParseTableImage(image));
    const int64_t p = FirstDifference(a, b, consumed);
    if (p < 0) return Status::Ok();
    auto layout = LayoutMixture(old);
    const std::string stage =
        layout.ok() ? layout->schedule.stages[static_cast<size_t>(layout->StageAt(p))].name : "?";
    std::string why;
    // The usual cause: a source whose tables now hold another number of epochs is reshuffled.
    // Tables are matched by token store and sample length (their numbers may differ).
    for (const auto& x : a.splits[0]->sources) {
      const SourceView* y = nullptr;
      for (const auto& s : b.splits[0]->sources) {
        if (s.prefix == x.prefix && s.seq_length == x.seq_length) y = &s;
      }
      if (y == nullptr) continue;
      const int64_t before = TableEpochs(x), after = TableEpochs(*y);
      if (before == after) continue;
      std::string name = x.prefix;
      for (const auto& src :
           layout.ok() ? layout->schedule.sources : std::vector<config::MixtureSource>()) {
        if (src.path == x.prefix) name = src.name;
      }
      name = "'" + name + "'";
      if (x.seq_length > 0) name += " at " + std::to_string(x.seq_length) + " tokens";
      why += (why.empty() ? "; " : ", ") + std::string("source ") + name +
             " is reshuffled: " + "its tables hold " + std::to_string(before) +
             " epoch(s) under the saved schedule, " + std::to_string(after) +
             " under the amended one";
    }
    if (!why.empty()) {
      why += " (an amendment may not change how many epochs a source's draws and surplus need)";
    }
    return FailedPrecondition("position " + std::to_string(p) + " (saved stage '" + stage +
                              "') reads another sample" + why);
  }

  std::string DescribeStageFrom(int64_t b) const override {
    auto layout = LayoutMixture(options_);
    std::string stage = "the mixture stage";
    for (size_t k = 0; layout.ok() && k + 1 < layout->stage_begin.size(); ++k) {
      if (layout->stage_begin[k] == b) {
        stage = "mixture schedule: schedule[" + std::to_string(k) + "] ('" +
                layout->schedule.stages[k].name + "')";
      }
    }
    return stage;
  }

  // Each source (per stage length) is a stream of its own Megatron tables.
  bool source_streams() const override { return true; }
  bool staged() const override { return true; }

  Result<StagePlan> Stages() const override {
    GRIDFEED_ASSIGN_OR_RETURN(MixtureLayout layout, LayoutMixture(options_));
    GRIDFEED_ASSIGN_OR_RETURN(ScheduledBlend blend, MixtureBlend(options_, layout));
    StagePlan plan;
    for (const auto& st : layout.schedule.stages) plan.names.push_back(st.name);
    plan.begin = layout.stage_begin;
    plan.seq_length = layout.stage_seq_length;
    plan.length = layout.length;
    plan.run_seq_length = layout.seq_length;
    auto shared_layout = std::make_shared<const MixtureLayout>(std::move(layout));
    plan.stage_at = [shared_layout](int64_t position) { return shared_layout->StageAt(position); };
    auto shared_blend = std::make_shared<const ScheduledBlend>(std::move(blend));
    plan.cumulative_target = [shared_blend](size_t k, int64_t q) {
      return CumulativeTarget(shared_blend->segments, k, q);
    };
    return plan;
  }

  Result<std::unique_ptr<OrderView>> ViewImage(std::span<const std::byte> image) const override {
    GRIDFEED_ASSIGN_OR_RETURN(MixtureLayout layout, LayoutMixture(options_));
    GRIDFEED_ASSIGN_OR_RETURN(auto inner,
                              ViewMegatronImage(image, MegatronSampleOptions(options_.data)));
    if (inner->length(Split::kTrain) != layout.length) {
      return DataLoss("the mixture table image does not match the schedule");
    }
    OrderView* raw = inner.get();
    auto view = std::make_unique<MixtureView>(raw, std::move(inner), std::move(layout));
    if (!view->MatchesLayout()) {
      return DataLoss("the mixture table image holds a table that is not a source of the schedule");
    }
    return std::unique_ptr<OrderView>(std::move(view));
  }

 private:
  config::JobOptions options_;
};

}  // namespace

Result<ScheduledBlend> MixtureBlend(const config::JobOptions& o, const MixtureLayout& layout) {
  GRIDFEED_ASSIGN_OR_RETURN(DatasetConfig c, MixtureDatasetConfigOf(o));
  GRIDFEED_ASSIGN_OR_RETURN(const SplitMatrix matrix, MixtureSplit(c));
  const auto& train = *matrix[0];
  const auto& sources = layout.schedule.sources;
  GRIDFEED_RETURN_IF_ERROR(CheckDistinctStores(layout.schedule));
  std::vector<double> tokens;
  std::vector<int64_t> caps;
  for (size_t k = 0; k < sources.size(); ++k) {
    auto ds = io::IndexedDataset::Open(sources[k].path);
    if (!ds.ok()) return ds.status().WithContext("mixture source '" + sources[k].name + "'");
    const auto [begin, end] = BookendToRange(train, ds->num_sequences());
    const auto [t, cap] = SourceSize(*ds, begin, end, c, layout.schedule.max_epochs[k]);
    GRIDFEED_RETURN_IF_ERROR(CheckNotEmpty(sources[k], t, begin, end, c));
    tokens.push_back(t);
    caps.push_back(cap);
  }
  return BuildScheduledBlend(MixtureStages(layout, tokens), caps);
}

std::unique_ptr<Pipeline> MakeMixturePipeline(const config::JobOptions& options) {
  return std::make_unique<MixturePipeline>(options);
}

}  // namespace gridfeed::order
