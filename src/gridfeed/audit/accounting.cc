// Account: per-source (and, for a staged order, per-stage) consumption against the targets, and
// the windowed shares it reports (declared in replay.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "gridfeed/audit/ledger_options.h"
#include "gridfeed/audit/replay.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::audit {

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
