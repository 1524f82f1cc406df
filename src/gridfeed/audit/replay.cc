#include "gridfeed/audit/replay.h"

#include <algorithm>

#include "gridfeed/audit/ledger_options.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/core/check.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::audit {

// The options of the ledger's configuration `i` (ledger.schedules; exact inverse of the
// canonical text), with the geometry of the first run that read under it (an order that depends
// on it, OLMo's, or budgets in iterations, were fingerprinted with it) and enough iterations for
// every record.
Result<config::JobOptions> LedgerOptions(const Ledger& ledger, size_t i) {
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
    // OLMo's order restarts where its first run started (order/olmo/olmo_pipeline.h).
    o.resume.consumed_samples = run->start_consumed;
  }
  for (const auto& e : ledger.entries) {
    o.run.train_iters = std::max(o.run.train_iters, e.record.iteration + 1);
  }
  return o;
}

namespace {

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
  if (orders_[i].view->fetch_ordered()) {
    // Fetch-ordered orders are not amendable (one order): the run's schedule is the last one
    // started at or before the iteration, as Batches reads it.
    size_t j = 0;
    for (size_t k = 1; k < schedules_.size(); ++k) {
      if (schedules_[k]->Place(0).first <= iteration) j = k;
    }
    const order::ReadSchedule& s = *schedules_[j];
    auto r = WalkedRecord(s, dp_rank, s.FirstStepOf(iteration) + micro_batch, position);
    GRIDFEED_CHECK(r.ok());  // positions come from the same schedule's Batches
    r->iteration = iteration;
    r->micro_batch = micro_batch;
    r->dp_rank = dp_rank;
    return *r;
  }
  order::Sample sample;
  auto r = orders_[i].view->Read(order::Split::kTrain, position, &sample, /*hash_tokens=*/true);
  r.iteration = iteration;
  r.micro_batch = micro_batch;
  r.dp_rank = dp_rank;
  return r;
}

Result<order::SampleRecord> Replay::WalkedRecord(const order::ReadSchedule& schedule,
                                                 int64_t dp_rank, int64_t step,
                                                 int64_t position) const {
  const order::OrderView& view = *orders_.back().view;
  Walk& w = walk_;
  if (w.schedule != &schedule || w.dp_rank != dp_rank || step < w.step) {
    w = Walk();
    w.schedule = &schedule;
    w.dp_rank = dp_rank;
    w.walker = std::make_unique<order::ReadSchedule::Walker>(schedule.Walk(dp_rank));
  }
  order::StepBatch b;
  order::Sample sample;
  while (w.step < step) {
    if (!w.walker->Next(&b)) {
      w = Walk();
      return InvalidArgument("step " + std::to_string(step) + " is beyond the run's schedule");
    }
    view.BeginMicroBatch(b.step);
    w.step = b.step;
    w.records.clear();
    for (int64_t p : b.positions) {
      w.records.push_back(view.Read(order::Split::kTrain, p, &sample, /*hash_tokens=*/true));
    }
  }
  for (const order::SampleRecord& r : w.records) {
    if (r.position == position) return r;
  }
  return InvalidArgument("DP rank " + std::to_string(dp_rank) + " read no position " +
                         std::to_string(position) + " at step " + std::to_string(step));
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

}  // namespace gridfeed::audit
