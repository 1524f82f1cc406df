#include "gridfeed/audit/replay.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "gridfeed/config/canonical.h"
#include "gridfeed/order/mixture_pipeline.h"

namespace gridfeed::audit {

namespace {

// The options a ledger's configuration text describes (exact inverse of the canonical text),
// with its first run's geometry (an order that depends on it, OLMo's, was fingerprinted with
// it) and enough iterations for every record.
Result<config::JobOptions> LedgerOptions(const Ledger& ledger) {
  config::JobOptions o;
  GRIDFEED_ASSIGN_OR_RETURN(o.data, config::FromCanonical(ledger.canonical_config));
  if (!ledger.segments.empty()) {
    o.batch.micro_batch_size = ledger.segments[0].micro_batch_size;
    o.batch.global_batch_size = ledger.segments[0].global_batch_size;
    o.grid.data_parallel_size = ledger.segments[0].dp_size;
  }
  for (const auto& e : ledger.entries) {
    o.run.train_iters = std::max(o.run.train_iters, e.record.iteration + 1);
  }
  return o;
}

// Builds the order alone (no schedule yet).
Result<std::unique_ptr<order::BuiltOrder>> BuildOrder(const config::JobOptions& options) {
  GRIDFEED_ASSIGN_OR_RETURN(auto pipeline, order::Pipeline::For(options));
  return pipeline->Build();
}

}  // namespace

Result<order::ReadSchedule> Replay::ScheduleFor(const order::ScheduleOptions& segment) const {
  order::ScheduleOptions s = segment;
  GRIDFEED_ASSIGN_OR_RETURN(s.type, order::ParseDataloaderType(options_.data.dataloader_type));
  s.total_samples = train_length();
  s.data_sharding = !options_.data.no_data_sharding;
  s.drop_last = true;
  return order::ReadSchedule::Create(s);
}

Result<std::unique_ptr<Replay>> Replay::Create(const config::JobOptions& options) {
  std::unique_ptr<Replay> r(new Replay());
  r->options_ = options;
  GRIDFEED_ASSIGN_OR_RETURN(r->built_, BuildOrder(options));
  r->view_ = &r->built_->view();
  if (r->train_length() == 0) return FailedPrecondition("the train split is empty");
  order::ScheduleOptions s;
  s.micro_batch_size = options.batch.micro_batch_size;
  s.dp_size = std::max<int64_t>(1, options.grid.data_parallel_size);
  s.global_batch_size = options.batch.global_batch_size;
  GRIDFEED_ASSIGN_OR_RETURN(auto schedule, r->ScheduleFor(s));
  r->schedules_.push_back(std::make_unique<order::ReadSchedule>(std::move(schedule)));
  return r;
}

Result<std::unique_ptr<Replay>> Replay::ForLedger(const Ledger& ledger) {
  if (ledger.segments.empty()) {
    return InvalidArgument(
        "the ledger has no segment lines (format version 1): give "
        "--data-parallel-size, --micro-batch-size and --global-batch-size");
  }
  std::unique_ptr<Replay> r(new Replay());
  GRIDFEED_ASSIGN_OR_RETURN(r->options_, LedgerOptions(ledger));
  GRIDFEED_ASSIGN_OR_RETURN(r->built_, BuildOrder(r->options_));
  r->view_ = &r->built_->view();
  if (r->train_length() == 0) return FailedPrecondition("the train split is empty");
  for (const auto& segment : ledger.segments) {
    GRIDFEED_ASSIGN_OR_RETURN(auto schedule, r->ScheduleFor(segment));
    r->schedules_.push_back(std::make_unique<order::ReadSchedule>(std::move(schedule)));
  }
  return r;
}

std::pair<int64_t, int64_t> Replay::Governed(size_t i, int64_t first, int64_t last) const {
  // Schedule i governs its iterations until a later one starts at or before them.
  int64_t until = last;
  for (size_t j = i + 1; j < schedules_.size(); ++j) {
    until = std::min(until, schedules_[j]->Place(0).first);
  }
  return {std::max(first, schedules_[i]->Place(0).first), until};
}

int64_t Replay::StepsIn(int64_t first, int64_t last) const {
  int64_t steps = 0;
  for (size_t i = 0; i < schedules_.size(); ++i) {
    const order::ReadSchedule& schedule = *schedules_[i];
    const auto [from, until] = Governed(i, first, last);
    if (from >= until) continue;
    // Iterations are below 2^40 steps apart in any sane range; clamp to the schedule's end.
    const int64_t per = schedule.micro_batches_per_iteration();
    const int64_t span = std::min<int64_t>(until - from, (int64_t{1} << 62) / per);
    const int64_t begin = std::max<int64_t>(0, schedule.FirstStepOf(from));
    steps += std::max<int64_t>(0, std::min(schedule.num_steps() - begin, span * per));
    if (steps > (int64_t{1} << 61)) break;
  }
  return steps;
}

int64_t Replay::max_dp_size() const {
  int64_t dp = 1;
  for (const auto& s : schedules_) dp = std::max(dp, s->options().dp_size);
  return dp;
}

order::SampleRecord Replay::Record(int64_t position, int64_t iteration, int64_t micro_batch,
                                   int64_t dp_rank) const {
  order::Sample sample;
  auto r = view_->Read(order::Split::kTrain, position, &sample, /*hash_tokens=*/true);
  r.iteration = iteration;
  r.micro_batch = micro_batch;
  r.dp_rank = dp_rank;
  return r;
}

std::vector<order::StepBatch> Replay::Batches(int64_t first, int64_t last, int64_t dp_rank) const {
  std::vector<order::StepBatch> out;
  for (size_t i = 0; i < schedules_.size(); ++i) {
    const order::ReadSchedule& schedule = *schedules_[i];
    const auto [from, until] = Governed(i, first, last);
    if (from >= until || dp_rank >= schedule.options().dp_size) continue;
    auto walker = schedule.Walk(dp_rank);
    walker.SkipTo(std::max<int64_t>(0, schedule.FirstStepOf(from)));
    order::StepBatch b;
    while (walker.Next(&b) && b.iteration < until) {
      if (b.iteration < from) continue;
      if (static_cast<int64_t>(b.positions.size()) == schedule.options().micro_batch_size) {
        out.push_back(b);
      }
    }
  }
  return out;
}

namespace {

std::string FirstDifferentField(const order::SampleRecord& got, const order::SampleRecord& want) {
  auto field = [](const char* name, auto a, auto b) {
    return std::string(name) + " recorded " + std::to_string(a) + ", recomputed " +
           std::to_string(b);
  };
  if (got.dataset != want.dataset) return field("dataset", got.dataset, want.dataset);
  if (got.dataset_sample != want.dataset_sample) {
    return field("dataset_sample", got.dataset_sample, want.dataset_sample);
  }
  if (got.first_document != want.first_document) {
    return field("first_document", got.first_document, want.first_document);
  }
  if (got.first_offset != want.first_offset) {
    return field("first_offset", got.first_offset, want.first_offset);
  }
  if (got.token_xxh3 != want.token_xxh3) return "token_xxh3 differs (the tokens changed)";
  return "a field differs";
}

}  // namespace

namespace {

// Who read what when: each file's records, segment by segment, must be what the segment's
// schedule gives its DP rank, in order. Returns the first difference (empty if none).
std::string CheckSchedule(const Ledger& ledger, const Replay& replay) {
  std::vector<std::unique_ptr<order::ReadSchedule>> schedules;
  for (const auto& segment : ledger.segments) {
    auto s = replay.ScheduleFor(segment);
    if (!s.ok()) return "a segment line cannot be planned: " + s.status().message();
    schedules.push_back(std::make_unique<order::ReadSchedule>(std::move(s).value()));
  }
  std::string file;
  int64_t segment_line = -1;
  std::optional<order::ReadSchedule::Walker> walker;
  order::StepBatch batch;
  size_t k = 0;
  for (const auto& e : ledger.entries) {
    const std::string where = e.file + " line " + std::to_string(e.line);
    if (e.segment < 0) return where + ": a record before any segment line";
    if (e.file != file || e.segment_line != segment_line) {  // a run (re)started here
      file = e.file;
      segment_line = e.segment_line;
      const auto& schedule = *schedules[static_cast<size_t>(e.segment)];
      if (e.file_dp_rank >= schedule.options().dp_size) {
        return where + ": a record in the file of DP rank " + std::to_string(e.file_dp_rank) +
               " from a run with DP " + std::to_string(schedule.options().dp_size);
      }
      walker.emplace(schedule.Walk(e.file_dp_rank));
      batch.positions.clear();
      k = 0;
    }
    if (k == batch.positions.size()) {
      if (!walker->Next(&batch)) return where + ": a record after the schedule's end";
      k = 0;
    }
    const auto& got = e.record;
    const int64_t want_position = batch.positions[k++];
    if (got.iteration != batch.iteration || got.micro_batch != batch.micro_batch ||
        got.dp_rank != e.file_dp_rank || got.position != want_position) {
      return where + ": recorded iteration " + std::to_string(got.iteration) + " micro-batch " +
             std::to_string(got.micro_batch) + " dp_rank " + std::to_string(got.dp_rank) +
             " position " + std::to_string(got.position) + ", the read schedule gives iteration " +
             std::to_string(batch.iteration) + " micro-batch " + std::to_string(batch.micro_batch) +
             " dp_rank " + std::to_string(e.file_dp_rank) + " position " +
             std::to_string(want_position);
    }
  }
  return "";
}

}  // namespace

Result<VerifyReport> Verify(const Ledger& ledger) {
  GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions o, LedgerOptions(ledger));
  VerifyReport report;
  if (config::FingerprintOf(ledger.canonical_config) != ledger.fingerprint) {
    report.first_difference = "the fingerprint line " + ledger.fingerprint +
                              " is not the hash of the configuration line (" +
                              config::FingerprintOf(ledger.canonical_config) + ")";
    return report;
  }
  if (ledger.entries.empty()) {
    report.first_difference = "the ledger holds no records: nothing is proven";
    return report;
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::Create(o));
  if (ledger.version >= 2) {
    report.first_difference = CheckSchedule(ledger, *replay);
    if (!report.first_difference.empty()) return report;
    report.schedule_checked = true;
  }
  std::vector<int64_t> positions;
  for (const auto& e : ledger.entries) {
    const auto& got = e.record;
    ++report.records;
    positions.push_back(got.position);
    if (got.position < 0 || got.position >= replay->train_length()) {
      report.first_difference = e.file + " line " + std::to_string(e.line) + ": position " +
                                std::to_string(got.position) + " outside the split's " +
                                std::to_string(replay->train_length()) + " samples";
      return report;
    }
    const auto want = replay->Record(got.position, got.iteration, got.micro_batch, got.dp_rank);
    if (want != got) {
      report.first_difference =
          "iteration " + std::to_string(got.iteration) + " micro-batch " +
          std::to_string(got.micro_batch) + " dp_rank " + std::to_string(got.dp_rank) +
          " position " + std::to_string(got.position) + " (" + e.file + " line " +
          std::to_string(e.line) + "): " + FirstDifferentField(got, want) + "; recorded '" +
          FormatRecord(got) + "', recomputed '" + FormatRecord(want) + "'";
      return report;
    }
  }
  if (o.data.dataloader_type == "cyclic") {  // every epoch reads the positions again
    report.exactly_once = false;
    report.ok = true;
    return report;
  }
  std::sort(positions.begin(), positions.end());
  for (size_t i = 0; i < positions.size(); ++i) {
    if (i > 0 && positions[i] == positions[i - 1]) {
      report.first_difference =
          "position " + std::to_string(positions[i]) + " was consumed more than once";
      return report;
    }
    if (positions[i] != static_cast<int64_t>(i)) {
      report.first_difference = "position " + std::to_string(i) +
                                " was never consumed (the next recorded is " +
                                std::to_string(positions[i]) + ")";
      return report;
    }
  }
  report.consumed = static_cast<int64_t>(positions.size());
  report.ok = true;
  return report;
}

namespace {

// Per stage of the ledger's mixture schedule: each record counts in the stage of its position;
// the targets are the schedule's cumulative targets over the positions the ledger covered.
Result<std::vector<StageAccount>> AccountStages(const Ledger& ledger, const config::JobOptions& o,
                                                int64_t until,
                                                const std::vector<order::SourceInfo>& sources,
                                                int64_t seq_length) {
  GRIDFEED_ASSIGN_OR_RETURN(const order::MixtureLayout layout, order::LayoutMixture(o));
  GRIDFEED_ASSIGN_OR_RETURN(const order::ScheduledBlend blend, order::MixtureBlend(o, layout));
  const size_t n = sources.size(), num_stages = layout.schedule.stages.size();
  std::vector<StageAccount> out(num_stages);
  for (size_t i = 0; i < num_stages; ++i) {
    out[i].name = layout.schedule.stages[i].name;
    out[i].begin = out[i].reached = layout.stage_begin[i];
    out[i].end = layout.stage_begin[i + 1];
    out[i].sources.resize(n);
  }
  for (const auto& e : ledger.entries) {
    if (until >= 0 && e.record.iteration >= until) continue;
    const auto i = static_cast<size_t>(layout.StageAt(e.record.position));
    auto& st = out[i];
    ++st.sources[static_cast<size_t>(e.record.dataset)].samples;
    st.reached = std::max(st.reached, std::min(st.end, e.record.position + 1));
    if (st.first_iteration < 0 || e.record.iteration < st.first_iteration) {
      st.first_iteration = e.record.iteration;
    }
  }
  std::vector<int64_t> cumulative(n, 0);
  for (auto& st : out) {
    int64_t total = 0;
    for (const auto& s : st.sources) total += s.samples;
    // The target over what was covered (the whole stage when it was not reached).
    const int64_t hi = st.reached > st.begin ? st.reached : st.end;
    for (size_t k = 0; k < n; ++k) {
      auto& s = st.sources[k];
      s.tokens = s.samples * seq_length;
      s.share = total ? static_cast<double>(s.samples) / static_cast<double>(total) : 0;
      s.target = (order::CumulativeTarget(blend.segments, k, hi) -
                  order::CumulativeTarget(blend.segments, k, st.begin)) /
                 static_cast<double>(hi - st.begin);
      cumulative[k] += s.samples;
      const int64_t per_epoch = sources[k].samples_per_epoch;
      s.epochs =
          per_epoch ? static_cast<double>(cumulative[k]) / static_cast<double>(per_epoch) : 0;
    }
  }
  return out;
}

}  // namespace

Result<Accounting> Account(const Ledger& ledger, int64_t until) {
  GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions o, LedgerOptions(ledger));
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::Create(o));
  const auto sources = replay->view().Sources(order::Split::kTrain);
  Accounting a;
  const size_t n = sources.size();
  a.sources.resize(n);
  for (size_t k = 0; k < n; ++k) {
    a.sources[k].prefix = sources[k].name;
    a.sources[k].weight = sources[k].weight;
  }
  std::map<int64_t, std::vector<int64_t>> per_iteration;  // iteration -> samples per source
  for (const auto& e : ledger.entries) {
    if (until >= 0 && e.record.iteration >= until) continue;
    if (e.record.dataset < 0 || static_cast<size_t>(e.record.dataset) >= n) {
      return DataLoss(e.file + " line " + std::to_string(e.line) + ": dataset " +
                      std::to_string(e.record.dataset) + " is not a source of this order (it has " +
                      std::to_string(n) + ")");
    }
    auto& v = per_iteration[e.record.iteration];
    v.resize(n, 0);
    ++v[static_cast<size_t>(e.record.dataset)];
  }
  std::vector<int64_t> cumulative(n, 0);
  a.series.assign(n, {});
  for (const auto& [it, counts] : per_iteration) {
    a.iterations.push_back(it);
    for (size_t k = 0; k < n; ++k) {
      cumulative[k] += counts[k];
      a.series[k].push_back(cumulative[k] * replay->seq_length());
    }
  }
  int64_t total = 0;
  for (int64_t c : cumulative) total += c;
  for (size_t k = 0; k < n; ++k) {
    auto& s = a.sources[k];
    s.samples = cumulative[k];
    s.tokens = cumulative[k] * replay->seq_length();
    s.share = total ? static_cast<double>(s.samples) / static_cast<double>(total) : 0;
    const int64_t per_epoch = sources[k].samples_per_epoch;
    s.epochs = per_epoch ? static_cast<double>(s.samples) / static_cast<double>(per_epoch) : 0;
  }
  if (!o.data.mixture_schedule.empty()) {
    GRIDFEED_ASSIGN_OR_RETURN(a.stages,
                              AccountStages(ledger, o, until, sources, replay->seq_length()));
  }
  return a;
}

}  // namespace gridfeed::audit
