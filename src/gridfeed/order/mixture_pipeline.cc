#include "gridfeed/order/mixture_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "gridfeed/core/log.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/megatron_pipeline.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order {
namespace {

constexpr int64_t kMaxLength = int64_t{1} << 40;

std::string StageKey(size_t i) { return "schedule[" + std::to_string(i) + "]"; }

// Adds the stage names and per-source names to Megatron's view of the tables.
class MixtureView final : public OrderView {
 public:
  MixtureView(OrderView* inner, std::unique_ptr<OrderView> owned, MixtureLayout layout)
      : inner_(inner), owned_(std::move(owned)), layout_(std::move(layout)) {}

  int64_t length(Split s) const override { return inner_->length(s); }
  const std::vector<std::string>& token_stores() const override { return inner_->token_stores(); }
  std::vector<std::string> TokenFiles() const override { return inner_->TokenFiles(); }
  Status OpenTokenStores(bool checked_on_node) override {
    return inner_->OpenTokenStores(checked_on_node);
  }
  std::vector<StoreFacts> TokenStoreFacts(uint64_t salt) const override {
    return inner_->TokenStoreFacts(salt);
  }
  SampleRecord Read(Split s, int64_t position, Sample* out, bool hash_tokens) const override {
    return inner_->Read(s, position, out, hash_tokens);
  }
  SampleRecord ReadFields(Split s, int64_t position, const FieldTargets& out, bool hash_tokens,
                          AssemblyScratch* scratch) const override {
    return inner_->ReadFields(s, position, out, hash_tokens, scratch);
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
  int SourceOf(Split s, int64_t position) const override { return inner_->SourceOf(s, position); }
  std::vector<SourceInfo> Sources(Split s) const override {
    auto out = inner_->Sources(s);
    for (size_t k = 0; k < out.size() && k < layout_.schedule.sources.size(); ++k) {
      out[k].name = layout_.schedule.sources[k].name;
    }
    return out;
  }

 private:
  OrderView* inner_;
  std::unique_ptr<OrderView> owned_;
  MixtureLayout layout_;
};

class MixtureBuilt final : public BuiltOrder {
 public:
  MixtureBuilt(std::unique_ptr<BuiltOrder> inner, MixtureLayout layout, std::string facts)
      : inner_(std::move(inner)),
        view_(&inner_->view(), nullptr, std::move(layout)),
        facts_(std::move(facts)) {}
  std::string DataFacts() const override { return facts_; }
  OrderView& view() override { return view_; }
  std::unique_ptr<ImageWriter> TakeImage() override { return inner_->TakeImage(); }

 private:
  std::unique_ptr<BuiltOrder> inner_;
  MixtureView view_;
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

// A source's train tokens (what temperature weights use) and its cap in samples (-1: none).
std::pair<double, int64_t> SourceSize(const io::IndexedDataset& ds, int64_t begin, int64_t end,
                                      const DatasetConfig& c, double max_epochs) {
  const int64_t x = c.add_extra_token ? 1 : 0;
  const auto lengths = ds.sequence_lengths();
  int64_t t = 0;
  for (int64_t i = begin; i < end; ++i) t += lengths[static_cast<size_t>(i)];
  const int64_t per_epoch = std::max<int64_t>(0, (t - x) / c.seq_length);
  const int64_t cap =
      max_epochs > 0 ? static_cast<int64_t>(std::floor(max_epochs * static_cast<double>(per_epoch)))
                     : -1;
  return {static_cast<double>(t), cap};
}

Result<DatasetConfig> MixtureDatasetConfigOf(const config::JobOptions& o) {
  config::DataOptions d = o.data;
  d.mixture_schedule.clear();
  return MegatronDatasetConfig(d);
}

class MixturePipeline final : public Pipeline {
 public:
  explicit MixturePipeline(const config::JobOptions& o) : options_(o) {}

  Result<std::unique_ptr<BuiltOrder>> Build() const override {
    GRIDFEED_ASSIGN_OR_RETURN(MixtureLayout layout, LayoutMixture(options_));
    GRIDFEED_ASSIGN_OR_RETURN(DatasetConfig c, MixtureDatasetConfigOf(options_));
    const auto& sources = layout.schedule.sources;
    Stopwatch clock;
    GRIDFEED_ASSIGN_OR_RETURN(const SplitMatrix matrix, MixtureSplit(c));
    const auto& train = *matrix[0];
    SplitDataset sd;
    sd.blended = true;
    std::vector<double> tokens;
    std::vector<int64_t> caps;
    for (size_t k = 0; k < sources.size(); ++k) {
      auto ds = io::IndexedDataset::Open(sources[k].path);
      if (!ds.ok()) return ds.status().WithContext("mixture source '" + sources[k].name + "'");
      MidDataset m;
      m.prefix = sources[k].path;
      m.split = Split::kTrain;
      m.dataset = std::make_shared<const io::IndexedDataset>(std::move(ds).value());
      std::tie(m.begin, m.end) = BookendToRange(train, m.dataset->num_sequences());
      const auto [t, cap] =
          SourceSize(*m.dataset, m.begin, m.end, c, layout.schedule.max_epochs[k]);
      tokens.push_back(t);
      caps.push_back(cap);
      sd.mids.push_back(std::move(m));
    }
    const double open_s = clock.Seconds();
    GRIDFEED_ASSIGN_OR_RETURN(ScheduledBlend blend,
                              BuildScheduledBlend(MixtureStages(layout, tokens), caps));
    const double blend_s = clock.Seconds() - open_s;
    for (const auto& e : blend.caps) {
      log::Info(CapLine(layout, e, layout.schedule.max_epochs[static_cast<size_t>(e.source)]));
    }
    // Each source's tables hold what the blend draws from it plus Megatron's surplus.
    for (size_t k = 0; k < sources.size(); ++k) {
      const double t = std::ceil(blend.final_targets[k]);
      const auto asked = static_cast<int64_t>(std::ceil(t * (1.0 + c.mid_level_dataset_surplus)));
      sd.mids[k].num_samples_requested = std::max(asked, blend.counts[k]);
      sd.weights.push_back(blend.final_targets[k] / static_cast<double>(layout.length));
    }
    sd.size = layout.length;
    sd.length = layout.length;
    sd.blend = std::move(blend.tables);
    BuiltDatasets built;
    built.splits[0] = std::move(sd);
    built.split_matrix = matrix;
    built.pad_id_used = PadIdUsed(c.pad_id, c.eod_id);
    GRIDFEED_RETURN_IF_ERROR(BuildMidTables(built.splits, c));
    for (size_t k = 0; k < sources.size(); ++k) {
      const auto& m = built.splits[0]->mids[k];
      if (m.tables.num_samples() < blend.counts[k]) {
        return FailedPrecondition("mixture source '" + sources[k].name + "' has " +
                                  std::to_string(m.tables.num_samples()) +
                                  " samples, the schedule draws " +
                                  std::to_string(blend.counts[k]));
      }
    }
    char line[256];
    std::snprintf(line, sizeof(line),
                  "mixture order: %lld samples in %zu stage(s) over %zu source(s); open %.3f s, "
                  "blend %.3f s, tables %.3f s",
                  static_cast<long long>(layout.length), layout.schedule.stages.size(),
                  sources.size(), open_s, blend_s, clock.Seconds() - open_s - blend_s);
    log::Info(line);
    // The data facts: Megatron's (the stores) and the resolved schedule.
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
    return std::unique_ptr<BuiltOrder>(
        std::make_unique<MixtureBuilt>(std::move(inner), std::move(layout), facts.dump()));
  }

  Result<std::unique_ptr<OrderView>> ViewImage(std::span<const std::byte> image) const override {
    GRIDFEED_ASSIGN_OR_RETURN(MixtureLayout layout, LayoutMixture(options_));
    GRIDFEED_ASSIGN_OR_RETURN(auto inner,
                              ViewMegatronImage(image, MegatronSampleOptions(options_.data)));
    if (inner->length(Split::kTrain) != layout.length) {
      return DataLoss("the mixture table image does not match the schedule");
    }
    OrderView* raw = inner.get();
    return std::unique_ptr<OrderView>(
        std::make_unique<MixtureView>(raw, std::move(inner), std::move(layout)));
  }

 private:
  config::JobOptions options_;
};

}  // namespace

int MixtureLayout::StageAt(int64_t position) const {
  const auto it = std::upper_bound(stage_begin.begin(), stage_begin.end() - 1, position);
  return std::max(0, static_cast<int>(it - stage_begin.begin()) - 1);
}

Result<MixtureLayout> LayoutMixture(const config::JobOptions& o) {
  MixtureLayout l;
  GRIDFEED_ASSIGN_OR_RETURN(l.schedule, config::ParseMixtureSchedule(o.data.mixture_schedule));
  l.seq_length = o.data.seq_length;
  if (l.seq_length <= 0) return InvalidArgument("--seq-length must be positive");
  l.global_batch_size =
      o.batch.global_batch_size
          ? o.batch.global_batch_size
          : o.batch.micro_batch_size * std::max<int64_t>(1, o.grid.data_parallel_size);
  auto to_samples = [&](config::BudgetUnit unit, int64_t n,
                        const std::string& key) -> Result<int64_t> {
    if (unit == config::BudgetUnit::kTokens) return (n + l.seq_length - 1) / l.seq_length;
    if (unit == config::BudgetUnit::kSamples) return n;
    if (n > kMaxLength / std::max<int64_t>(1, l.global_batch_size)) {
      return InvalidArgument("mixture schedule: " + key + " x --global-batch-size is too large");
    }
    return n * l.global_batch_size;
  };
  for (size_t i = 0; i < l.schedule.stages.size(); ++i) {
    const auto& st = l.schedule.stages[i];
    const std::string key = StageKey(i) + "." + config::BudgetUnitName(st.unit);
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, to_samples(st.unit, st.budget, key));
    GRIDFEED_ASSIGN_OR_RETURN(int64_t r, to_samples(st.ramp_unit, st.ramp, key));
    if (r > n) {
      return InvalidArgument("mixture schedule: " + StageKey(i) + ".ramp_" +
                             config::BudgetUnitName(st.ramp_unit) + " is " + std::to_string(r) +
                             " samples, longer than the stage's " + std::to_string(n));
    }
    l.stage_begin.push_back(l.length);
    l.stage_samples.push_back(n);
    l.ramp_samples.push_back(r);
    l.length += n;
    if (l.length > kMaxLength) {
      return InvalidArgument("mixture schedule: the stages add up to more than 2^40 samples at " +
                             key);
    }
  }
  l.stage_begin.push_back(l.length);
  return l;
}

std::vector<BlendStage> MixtureStages(const MixtureLayout& layout,
                                      const std::vector<double>& source_tokens) {
  std::vector<BlendStage> out;
  for (size_t i = 0; i < layout.schedule.stages.size(); ++i) {
    const auto& st = layout.schedule.stages[i];
    BlendStage b;
    b.name = st.name;
    b.samples = layout.stage_samples[i];
    b.ramp_samples = layout.ramp_samples[i];
    std::vector<double> raw = st.weights;
    if (raw.empty()) {
      for (double t : source_tokens) raw.push_back(t > 0 ? std::pow(t, st.size_exponent) : 0.0);
    }
    b.weights = Normalize(raw);
    out.push_back(std::move(b));
  }
  return out;
}

Result<ScheduledBlend> MixtureBlend(const config::JobOptions& o, const MixtureLayout& layout) {
  GRIDFEED_ASSIGN_OR_RETURN(DatasetConfig c, MixtureDatasetConfigOf(o));
  GRIDFEED_ASSIGN_OR_RETURN(const SplitMatrix matrix, MixtureSplit(c));
  const auto& train = *matrix[0];
  const auto& sources = layout.schedule.sources;
  std::vector<double> tokens;
  std::vector<int64_t> caps;
  for (size_t k = 0; k < sources.size(); ++k) {
    auto ds = io::IndexedDataset::Open(sources[k].path);
    if (!ds.ok()) return ds.status().WithContext("mixture source '" + sources[k].name + "'");
    const auto [begin, end] = BookendToRange(train, ds->num_sequences());
    const auto [t, cap] = SourceSize(*ds, begin, end, c, layout.schedule.max_epochs[k]);
    tokens.push_back(t);
    caps.push_back(cap);
  }
  return BuildScheduledBlend(MixtureStages(layout, tokens), caps);
}

std::unique_ptr<Pipeline> MakeMixturePipeline(const config::JobOptions& options) {
  return std::make_unique<MixturePipeline>(options);
}

}  // namespace gridfeed::order
