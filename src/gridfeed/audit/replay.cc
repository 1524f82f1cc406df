#include "gridfeed/audit/replay.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "gridfeed/config/canonical.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::audit {

namespace {

// The options of the ledger's configuration `i` (ledger.schedules; exact inverse of the
// canonical text), with the geometry of the first run that read under it (an order that depends
// on it, OLMo's, or budgets in iterations, were fingerprinted with it) and enough iterations for
// every record.
Result<config::JobOptions> LedgerOptions(const Ledger& ledger, size_t i = 0) {
  config::JobOptions o;
  const bool own = i < ledger.schedules.size();  // ReadLedger fills `schedules`; others may not
  GRIDFEED_ASSIGN_OR_RETURN(o.data, config::FromCanonical(own ? ledger.schedules[i].canonical_config
                                                              : ledger.canonical_config));
  const int64_t from = own ? ledger.schedules[i].position : 0;
  const order::ScheduleOptions* run = nullptr;  // the first run that started under it
  for (const auto& s : ledger.segments) {
    if (s.start_consumed >= from) {
      run = &s;
      break;
    }
  }
  if (run == nullptr && !ledger.segments.empty()) run = &ledger.segments.back();
  if (run != nullptr) {
    o.batch.micro_batch_size = run->micro_batch_size;
    o.batch.global_batch_size = run->global_batch_size;
    o.grid.data_parallel_size = run->dp_size;
    // OLMo's order restarts where its first run started (order/olmo_pipeline.h).
    o.resume.consumed_samples = run->start_consumed;
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
  s.total_samples = OrderLength(OrderAt(segment.start_consumed));
  s.data_sharding = !options_.data.no_data_sharding;
  s.drop_last = true;
  return order::ReadSchedule::Create(s);
}

int64_t Replay::OrderLength(size_t i) const {
  return orders_[i].view->length(order::Split::kTrain);
}

size_t Replay::OrderAt(int64_t position) const {
  size_t i = 0;
  while (i + 1 < orders_.size() && orders_[i + 1].from <= position) ++i;
  return i;
}

Result<std::unique_ptr<Replay>> Replay::Create(const config::JobOptions& options) {
  std::unique_ptr<Replay> r(new Replay());
  r->options_ = options;
  Order order;
  GRIDFEED_ASSIGN_OR_RETURN(order.built, BuildOrder(options));
  order.view = &order.built->view();
  r->orders_.push_back(std::move(order));
  if (r->train_length() == 0) return FailedPrecondition("the train split is empty");
  order::ScheduleOptions s;
  s.micro_batch_size = options.batch.micro_batch_size;
  s.dp_size = std::max<int64_t>(1, options.grid.data_parallel_size);
  s.global_batch_size = options.batch.global_batch_size;
  GRIDFEED_ASSIGN_OR_RETURN(auto schedule, r->ScheduleFor(s));
  r->schedules_.push_back(std::make_unique<order::ReadSchedule>(std::move(schedule)));
  return r;
}

Result<std::unique_ptr<Replay>> Replay::OrdersOf(const Ledger& ledger,
                                                 const config::JobOptions* geometry) {
  // Configuration i, read with the given geometry instead of the ledger's when there is one.
  auto options = [&](size_t i) -> Result<config::JobOptions> {
    GRIDFEED_ASSIGN_OR_RETURN(config::JobOptions o, LedgerOptions(ledger, i));
    if (geometry == nullptr) return o;
    const int64_t iters = std::max(o.run.train_iters, geometry->run.train_iters);
    config::JobOptions g = *geometry;
    g.data = std::move(o.data);
    g.resume.consumed_samples = o.resume.consumed_samples;  // where OLMo's order restarts
    g.run.train_iters = iters;
    return g;
  };
  GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions first, options(0));
  GRIDFEED_ASSIGN_OR_RETURN(auto r, Create(first));
  for (size_t i = 1; i < ledger.schedules.size(); ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions o, options(i));
    Order order;
    order.from = ledger.schedules[i].position;
    GRIDFEED_ASSIGN_OR_RETURN(order.built, BuildOrder(o));
    order.view = &order.built->view();
    r->orders_.push_back(std::move(order));
  }
  return r;
}

Result<std::unique_ptr<Replay>> Replay::ForLedger(const Ledger& ledger) {
  if (ledger.segments.empty()) {
    return InvalidArgument(
        "the ledger has no segment lines (format version 1): give "
        "--data-parallel-size, --micro-batch-size and --global-batch-size");
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto r, OrdersOf(ledger));
  r->schedules_.clear();
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
  return RecordUnder(OrderAt(position), position, iteration, micro_batch, dp_rank);
}

order::SampleRecord Replay::RecordUnder(size_t i, int64_t position, int64_t iteration,
                                        int64_t micro_batch, int64_t dp_rank) const {
  order::Sample sample;
  auto r = orders_[i].view->Read(order::Split::kTrain, position, &sample, /*hash_tokens=*/true);
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
  std::vector<Ledger::Schedule> all = ledger.schedules;
  if (all.empty()) all.push_back({0, ledger.fingerprint, ledger.canonical_config});
  for (const auto& sc : all) {
    if (config::FingerprintOf(sc.canonical_config) != sc.fingerprint) {
      report.first_difference =
          "the fingerprint line " + sc.fingerprint +
          (sc.position ? " of the schedule from position " + std::to_string(sc.position) : "") +
          " is not the hash of the configuration line (" +
          config::FingerprintOf(sc.canonical_config) + ")";
      return report;
    }
  }
  if (ledger.entries.empty()) {
    report.first_difference = "the ledger holds no records: nothing is proven";
    return report;
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::OrdersOf(ledger));
  report.schedules = static_cast<int64_t>(replay->num_orders());
  if (ledger.version >= 2) {
    report.first_difference = CheckSchedule(ledger, *replay);
    if (!report.first_difference.empty()) return report;
    report.schedule_checked = true;
  }
  std::vector<int64_t> positions;
  GRIDFEED_ASSIGN_OR_RETURN(const auto pipeline, order::Pipeline::For(o));
  const bool streamed = pipeline->source_streams();
  // Streams (a mixture's): per source and seq length (a stage's own length is another stream
  // of the source), the samples read. An amendment keeps the past, lengths included: the last
  // schedule's lengths hold for every position.
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> streams;
  order::SeqLengths lengths;
  if (streamed) {
    GRIDFEED_ASSIGN_OR_RETURN(
        const config::JobOptions last,
        LedgerOptions(ledger, ledger.schedules.empty() ? size_t{0} : ledger.schedules.size() - 1));
    GRIDFEED_ASSIGN_OR_RETURN(lengths, order::SeqLengthsOf(last));
  }
  for (const auto& e : ledger.entries) {
    const auto& got = e.record;
    ++report.records;
    positions.push_back(got.position);
    const std::string where = e.file + " line " + std::to_string(e.line);
    const size_t in_force = replay->OrderAt(got.position);
    if (e.segment >= 0) {
      // The run that read it started under the schedule in force at the position: a resume
      // drops every record from its start on, so a later schedule's positions are its own.
      const int64_t start = ledger.segments[static_cast<size_t>(e.segment)].start_consumed;
      if (replay->OrderAt(start) != in_force) {
        report.first_difference = where + ": position " + std::to_string(got.position) +
                                  " was read by a run that started at " + std::to_string(start) +
                                  " under the schedule from position " +
                                  std::to_string(replay->OrderFrom(replay->OrderAt(start))) +
                                  ", but the schedule from position " +
                                  std::to_string(replay->OrderFrom(in_force)) + " governs it";
        return report;
      }
    }
    for (size_t i = in_force; i < replay->num_orders(); ++i) {
      if (got.position < 0 || got.position >= replay->OrderLength(i)) {
        report.first_difference =
            where + ": position " + std::to_string(got.position) + " outside the split's " +
            std::to_string(replay->OrderLength(i)) + " samples" +
            (i ? " (the schedule from position " + std::to_string(replay->OrderFrom(i)) + ")" : "");
        return report;
      }
      const auto want =
          replay->RecordUnder(i, got.position, got.iteration, got.micro_batch, got.dp_rank);
      if (want != got) {
        report.first_difference =
            "iteration " + std::to_string(got.iteration) + " micro-batch " +
            std::to_string(got.micro_batch) + " dp_rank " + std::to_string(got.dp_rank) +
            " position " + std::to_string(got.position) + " (" + where +
            "): " + FirstDifferentField(got, want) + "; recorded '" + FormatRecord(got) +
            "', recomputed '" + FormatRecord(want) + "'" +
            (i ? " under the schedule from position " + std::to_string(replay->OrderFrom(i)) +
                     (i > in_force ? " (an amendment must keep the order before it)" : "")
               : "");
        return report;
      }
    }
    if (streamed) {  // the source was checked against the order above
      streams[{got.dataset, lengths.At(got.position)}].push_back(got.dataset_sample);
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
  // Each source's stream (its Megatron tables, the same under every schedule as the records
  // above show): samples [0, n) each read once.
  const auto names = replay->view().Sources(order::Split::kTrain);
  for (auto& [key, v] : streams) {
    const auto k = static_cast<size_t>(key.first);
    std::sort(v.begin(), v.end());
    const std::string name =
        (k < names.size() ? names[k].name : std::to_string(k)) +
        (lengths.uniform() ? "" : "' at seq length '" + std::to_string(key.second));
    for (size_t j = 0; j < v.size(); ++j) {
      if (j > 0 && v[j] == v[j - 1]) {
        report.first_difference = "source '" + name + "': sample " + std::to_string(v[j]) +
                                  " of its stream was read more than once";
        return report;
      }
      if (v[j] != static_cast<int64_t>(j)) {
        report.first_difference = "source '" + name + "': sample " + std::to_string(j) +
                                  " of its stream was never read (the next recorded is " +
                                  std::to_string(v[j]) + ")";
        return report;
      }
    }
    report.streams.push_back(
        {key.first, lengths.uniform() ? 0 : key.second, static_cast<int64_t>(v.size())});
  }
  report.ok = true;
  return report;
}

WindowShares ComputeWindowShares(const std::vector<IterationReads>& reads, int64_t window,
                                 size_t num_sources,
                                 const std::function<double(size_t, int64_t)>& cumulative_target) {
  WindowShares out;
  const auto n = static_cast<int64_t>(reads.size());
  out.share.assign(num_sources, std::vector<double>(reads.size(), 0.0));
  out.target = out.share;
  out.largest.assign(num_sources, WindowDeviation());
  for (int64_t e = 0; e < n; ++e) {
    const int64_t s = std::max<int64_t>(0, e - window + 1);
    int64_t a = reads[static_cast<size_t>(s)].begin, b = reads[static_cast<size_t>(s)].end;
    std::vector<int64_t> counts(num_sources, 0);
    int64_t total = 0;
    for (int64_t i = s; i <= e; ++i) {
      const auto& r = reads[static_cast<size_t>(i)];
      a = std::min(a, r.begin);
      b = std::max(b, r.end);
      for (size_t k = 0; k < num_sources && k < r.counts.size(); ++k) {
        counts[k] += r.counts[k];
        total += r.counts[k];
      }
    }
    // Full windows, or the one window of every read when there are fewer.
    const bool full = e - s + 1 == window || (n < window && e == n - 1);
    for (size_t k = 0; k < num_sources; ++k) {
      const double share =
          total ? static_cast<double>(counts[k]) / static_cast<double>(total) : 0.0;
      const double target =
          b > a ? (cumulative_target(k, b) - cumulative_target(k, a)) / static_cast<double>(b - a)
                : 0.0;
      out.share[k][static_cast<size_t>(e)] = share;
      out.target[k][static_cast<size_t>(e)] = target;
      auto& w = out.largest[k];
      const double d = std::abs(share - target);
      if (full && (w.first_iteration < 0 || d > w.deviation)) {
        w = {d, share, target, reads[static_cast<size_t>(s)].iteration,
             reads[static_cast<size_t>(e)].iteration};
      }
    }
  }
  return out;
}

namespace {

// Cumulative targets over a ledger's schedules: from each schedule's position on, its own
// targets' increments (an amendment's targets before its position are not what the run was
// steered by).
class PiecewiseTarget {
 public:
  using Target = std::function<double(size_t, int64_t)>;  // StagePlan::cumulative_target
  void Add(int64_t from, Target target, size_t num_sources) {
    std::vector<double> base(num_sources, 0.0);
    for (size_t k = 0; k < num_sources; ++k) base[k] = pieces_.empty() ? 0.0 : At(k, from);
    pieces_.push_back({from, std::move(target), std::move(base)});
  }
  double At(size_t k, int64_t q) const {
    size_t i = 0;
    while (i + 1 < pieces_.size() && pieces_[i + 1].from <= q) ++i;
    const auto& p = pieces_[i];
    return p.base[k] + p.target(k, q) - p.target(k, p.from);
  }

 private:
  struct Piece {
    int64_t from;
    Target target;
    std::vector<double> base;  // T_k(from)
  };
  std::vector<Piece> pieces_;
};

// Per stage of the ledger's (last) mixture schedule: each record counts in the stage of its
// position; the targets are the cumulative targets over the positions the ledger covered.
// What one sample of `seq_length` tokens counts towards an epoch of `source` (1 at its length).
double EpochUnits(const order::SourceInfo& source, int64_t run_seq_length, int64_t seq_length) {
  const int64_t own = source.seq_length ? source.seq_length : run_seq_length;
  return own == seq_length ? 1.0 : static_cast<double>(seq_length) / static_cast<double>(own);
}

// `*target_read`: each source's target share over the positions read [lo, hi) (the whole
// schedule when none was).
Result<std::vector<StageAccount>> AccountStages(const Ledger& ledger, int64_t until, int64_t window,
                                                const std::vector<order::SourceInfo>& sources,
                                                std::vector<double>* target_read) {
  const size_t n = sources.size();
  PiecewiseTarget targets;
  order::StagePlan layout;
  for (size_t i = 0; i < ledger.schedules.size(); ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions o, LedgerOptions(ledger, i));
    GRIDFEED_ASSIGN_OR_RETURN(const auto pipeline, order::Pipeline::For(o));
    if (!pipeline->staged()) {
      return DataLoss("the ledger's schedule from position " +
                      std::to_string(ledger.schedules[i].position) + " is not a mixture");
    }
    GRIDFEED_ASSIGN_OR_RETURN(layout, pipeline->Stages());
    targets.Add(ledger.schedules[i].position, layout.cumulative_target, n);
  }
  const size_t num_stages = layout.names.size();
  std::vector<StageAccount> out(num_stages);
  for (size_t i = 0; i < num_stages; ++i) {
    out[i].name = layout.names[i];
    out[i].begin = out[i].reached = layout.begin[i];
    out[i].end = layout.begin[i + 1];
    out[i].sources.resize(n);
  }
  std::vector<std::map<int64_t, IterationReads>> reads(num_stages);  // by iteration
  std::vector<std::vector<double>> units(num_stages, std::vector<double>(n, 0.0));
  int64_t lo = -1, hi = -1;  // the positions read
  for (const auto& e : ledger.entries) {
    if (until >= 0 && e.record.iteration >= until) continue;
    lo = lo < 0 ? e.record.position : std::min(lo, e.record.position);
    hi = std::max(hi, e.record.position + 1);
    const auto i = static_cast<size_t>(layout.stage_at(e.record.position));
    auto& st = out[i];
    const auto source = static_cast<size_t>(e.record.dataset);
    ++st.sources[source].samples;
    st.sources[source].tokens += layout.seq_length[i];
    units[i][source] += EpochUnits(sources[source], layout.run_seq_length, layout.seq_length[i]);
    st.reached = std::max(st.reached, std::min(st.end, e.record.position + 1));
    if (st.first_iteration < 0 || e.record.iteration < st.first_iteration) {
      st.first_iteration = e.record.iteration;
    }
    auto [it, fresh] = reads[i].try_emplace(e.record.iteration);
    IterationReads& r = it->second;
    if (fresh) {
      r.iteration = e.record.iteration;
      r.begin = e.record.position;
      r.end = e.record.position + 1;
      r.counts.assign(n, 0);
    }
    r.begin = std::min(r.begin, e.record.position);
    r.end = std::max(r.end, e.record.position + 1);
    ++r.counts[static_cast<size_t>(e.record.dataset)];
  }
  if (lo < 0) lo = 0, hi = layout.length;
  target_read->assign(n, 0.0);
  for (size_t k = 0; k < n && hi > lo; ++k) {
    (*target_read)[k] = (targets.At(k, hi) - targets.At(k, lo)) / static_cast<double>(hi - lo);
  }
  std::vector<double> cumulative(n, 0);
  for (size_t i = 0; i < num_stages; ++i) {
    auto& st = out[i];
    int64_t total = 0;
    for (const auto& s : st.sources) total += s.samples;
    // The target over what was covered (the whole stage when it was not reached).
    const int64_t hi = st.reached > st.begin ? st.reached : st.end;
    std::vector<IterationReads> list;
    for (auto& [iteration, r] : reads[i]) {
      st.iterations.push_back(iteration);
      list.push_back(std::move(r));
    }
    const WindowShares w =
        ComputeWindowShares(list, window, n, [&](size_t k, int64_t q) { return targets.At(k, q); });
    for (size_t k = 0; k < n; ++k) {
      auto& s = st.sources[k];
      s.share = total ? static_cast<double>(s.samples) / static_cast<double>(total) : 0;
      s.target = (targets.At(k, hi) - targets.At(k, st.begin)) / static_cast<double>(hi - st.begin);
      cumulative[k] += units[i][k];
      const int64_t per_epoch = sources[k].samples_per_epoch;
      s.epochs = per_epoch ? cumulative[k] / static_cast<double>(per_epoch) : 0;
      s.window = w.largest[k];
      s.share_series = w.share[k];
      s.target_series = w.target[k];
    }
  }
  return out;
}

}  // namespace

Result<Accounting> Account(const Ledger& ledger, int64_t until, int64_t window) {
  if (window < 1) return InvalidArgument("the accounting window must be at least 1 iteration");
  GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions o, LedgerOptions(ledger));
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::OrdersOf(ledger));
  const auto sources = replay->view().Sources(order::Split::kTrain);
  Accounting a;
  const size_t n = sources.size();
  a.sources.resize(n);
  for (size_t k = 0; k < n; ++k) {
    a.sources[k].prefix = sources[k].name;
    a.sources[k].weight = sources[k].weight;
    a.sources[k].target = sources[k].weight;  // a blend's weights hold at every position
  }
  // The last schedule's lengths hold for every position (an amendment keeps the past).
  GRIDFEED_ASSIGN_OR_RETURN(
      const config::JobOptions last,
      LedgerOptions(ledger, ledger.schedules.empty() ? size_t{0} : ledger.schedules.size() - 1));
  GRIDFEED_ASSIGN_OR_RETURN(const order::SeqLengths lengths, order::SeqLengthsOf(last));
  std::map<int64_t, std::vector<int64_t>> per_iteration;  // iteration -> tokens per source
  std::vector<int64_t> samples(n, 0);
  std::vector<double> units(n, 0.0);
  for (const auto& e : ledger.entries) {
    if (until >= 0 && e.record.iteration >= until) continue;
    if (e.record.dataset < 0 || static_cast<size_t>(e.record.dataset) >= n) {
      return DataLoss(e.file + " line " + std::to_string(e.line) + ": dataset " +
                      std::to_string(e.record.dataset) + " is not a source of this order (it has " +
                      std::to_string(n) + ")");
    }
    const auto k = static_cast<size_t>(e.record.dataset);
    const int64_t len = lengths.At(e.record.position);
    auto& v = per_iteration[e.record.iteration];
    v.resize(n, 0);
    v[k] += len;
    ++samples[k];
    units[k] += EpochUnits(sources[k], last.data.seq_length, len);
  }
  std::vector<int64_t> cumulative(n, 0);
  a.series.assign(n, {});
  for (const auto& [it, tokens] : per_iteration) {
    a.iterations.push_back(it);
    for (size_t k = 0; k < n; ++k) {
      cumulative[k] += tokens[k];
      a.series[k].push_back(cumulative[k]);
    }
  }
  int64_t total = 0;
  for (int64_t c : samples) total += c;
  for (size_t k = 0; k < n; ++k) {
    auto& s = a.sources[k];
    s.samples = samples[k];
    s.tokens = cumulative[k];
    s.share = total ? static_cast<double>(s.samples) / static_cast<double>(total) : 0;
    const int64_t per_epoch = sources[k].samples_per_epoch;
    s.epochs = per_epoch ? units[k] / static_cast<double>(per_epoch) : 0;
  }
  a.window = window;
  GRIDFEED_ASSIGN_OR_RETURN(const auto pipeline, order::Pipeline::For(o));
  if (pipeline->staged()) {
    std::vector<double> target_read;
    GRIDFEED_ASSIGN_OR_RETURN(a.stages,
                              AccountStages(ledger, until, window, sources, &target_read));
    for (size_t k = 0; k < n; ++k) a.sources[k].target = target_read[k];
  }
  return a;
}

}  // namespace gridfeed::audit
