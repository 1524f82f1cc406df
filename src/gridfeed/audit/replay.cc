#include "gridfeed/audit/replay.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "gridfeed/config/canonical.h"

namespace gridfeed::audit {

Result<std::unique_ptr<Replay>> Replay::Create(const config::JobOptions& options) {
  std::unique_ptr<Replay> r(new Replay());
  r->options_ = options;
  GRIDFEED_ASSIGN_OR_RETURN(auto pipeline, order::Pipeline::For(options.data));
  GRIDFEED_ASSIGN_OR_RETURN(r->built_, pipeline->Build());
  r->view_ = &r->built_->view();
  if (r->train_length() == 0) return FailedPrecondition("the train split is empty");
  order::ScheduleOptions s;
  GRIDFEED_ASSIGN_OR_RETURN(s.type, order::ParseDataloaderType(options.data.dataloader_type));
  s.total_samples = r->train_length();
  s.micro_batch_size = options.batch.micro_batch_size;
  s.dp_size = std::max<int64_t>(1, options.grid.data_parallel_size);
  s.global_batch_size = options.batch.global_batch_size;
  s.data_sharding = !options.data.no_data_sharding;
  GRIDFEED_ASSIGN_OR_RETURN(auto schedule, order::ReadSchedule::Create(s));
  r->schedule_ = std::make_unique<order::ReadSchedule>(std::move(schedule));
  return r;
}

order::SampleRecord Replay::Record(int64_t position, int64_t iteration, int64_t micro_batch,
                                   int64_t dp_rank) const {
  order::Sample sample;
  auto r = view_->Read(order::Split::kTrain, position, &sample);
  r.iteration = iteration;
  r.micro_batch = micro_batch;
  r.dp_rank = dp_rank;
  return r;
}

std::vector<order::StepBatch> Replay::Batches(int64_t first, int64_t last, int64_t dp_rank) const {
  std::vector<order::StepBatch> out;
  auto walker = schedule_->Walk(dp_rank);
  walker.SkipTo(std::max<int64_t>(0, schedule_->FirstStepOf(first)));
  order::StepBatch b;
  while (walker.Next(&b) && b.iteration < last) {
    if (b.iteration < first) continue;
    if (static_cast<int64_t>(b.positions.size()) == options_.batch.micro_batch_size) {
      out.push_back(b);
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

// The options a ledger's configuration text describes (exact inverse of the canonical text).
Result<config::JobOptions> LedgerOptions(const Ledger& ledger) {
  config::JobOptions o;
  GRIDFEED_ASSIGN_OR_RETURN(o.data, config::FromCanonical(ledger.canonical_config));
  return o;
}

Result<VerifyReport> Verify(const Ledger& ledger) {
  GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions o, LedgerOptions(ledger));
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::Create(o));
  VerifyReport report;
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
  return a;
}

}  // namespace gridfeed::audit
