#include "gridfeed/order/mixture/mixture_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace gridfeed::order {
namespace {

// Weights of the active sources, renormalised; false when none is left.
bool Renormalised(const std::vector<double>& w, const std::vector<char>& active,
                  std::vector<double>* out) {
  out->assign(w.size(), 0.0);
  double sum = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    if (active[k]) sum += w[k];
  }
  if (!(sum > 0)) return false;
  for (size_t k = 0; k < w.size(); ++k) (*out)[k] = active[k] ? w[k] / sum : 0.0;
  return true;
}

// The segment that continues `prev` from `begin` with new target weights `to` (masked).
bool Continue(const BlendSegment& prev, int64_t begin, const std::vector<double>& to, int64_t ramp,
              const std::vector<char>& active, BlendSegment* seg) {
  const double x = static_cast<double>(begin - prev.begin);
  seg->begin = begin;
  seg->base.clear();
  std::vector<double> now;
  for (size_t k = 0; k < to.size(); ++k) {
    seg->base.push_back(prev.Target(k, x));
    now.push_back(prev.Weight(k, x));
  }
  if (!Renormalised(to, active, &seg->to)) return false;
  if (ramp == 0 || !Renormalised(now, active, &seg->from)) seg->from = seg->to;
  seg->ramp = ramp;
  return true;
}

std::string Fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", digits, v);
  return b;
}

std::string Tokens(double t) {
  char b[64];
  if (t >= 1e9) {
    std::snprintf(b, sizeof(b), "%.3gB", t / 1e9);
  } else if (t >= 1e6) {
    std::snprintf(b, sizeof(b), "%.3gM", t / 1e6);
  } else {
    std::snprintf(b, sizeof(b), "%.0f", t);
  }
  return b;
}

}  // namespace

std::string EpochVerdict(double epochs) {
  if (epochs >= kMemorisationEpochs) return "memorisation risk (>= 4 epochs)";
  if (epochs < 1) return "part never seen (" + Fixed(100 * (1 - epochs), 1) + "% unseen)";
  return "ok";
}

Result<MixturePlan> PlanMixture(const MixtureLayout& layout,
                                const std::vector<double>& source_tokens,
                                const std::vector<bool>& declared) {
  MixturePlan plan;
  const auto& sch = layout.schedule;
  const size_t n = sch.sources.size();
  plan.seq_length = layout.seq_length;
  plan.length = layout.length;
  plan.source_tokens = source_tokens;
  plan.declared = declared;
  for (const auto& src : sch.sources)
    plan.declared_tokens.push_back(static_cast<double>(src.tokens));
  double all = 0;
  for (size_t k = 0; k < n; ++k) {
    plan.source_names.push_back(sch.sources[k].name);
    if (!(source_tokens[k] > 0)) {
      return FailedPrecondition("mixture source '" + sch.sources[k].name +
                                "' has no tokens in its train part (--split): a source needs "
                                "data even with weight 0; drop it from sources or give it data");
    }
    all += source_tokens[k];
  }
  for (double t : source_tokens) plan.natural_share.push_back(t / all);
  const double L = static_cast<double>(layout.seq_length);
  // Stage lengths other than --seq-length: a sample of stage s counts r_s = L_s / L samples of
  // --seq-length against a cap and L_s tokens (one length: the targets themselves).
  bool uniform = true;
  for (int64_t len : layout.stage_seq_length) uniform = uniform && len == layout.seq_length;
  std::vector<double> units_before(n, 0.0), stage_base(n, 0.0), cum_tokens(n, 0.0);
  std::vector<double> caps(n, -1);
  for (size_t k = 0; k < n; ++k) {
    if (sch.max_epochs[k] > 0) {  // as the run counts it (mixture_pipeline.cc SourceSize)
      const double x = static_cast<double>(layout.extra_token);
      const double per_epoch = std::floor(std::max(0.0, source_tokens[k] - x) / L);
      caps[k] = std::floor(sch.max_epochs[k] * per_epoch);
    }
  }
  const std::vector<BlendStage> stages = MixtureStages(layout, source_tokens);
  std::vector<char> active(n, 1);
  std::vector<BlendSegment> segs;
  for (size_t s = 0; s < stages.size(); ++s) {
    const int64_t begin = layout.stage_begin[s], end = layout.stage_begin[s + 1];
    BlendSegment seg;
    seg.stage = static_cast<int>(s);
    bool ok;
    if (segs.empty()) {
      seg.base.assign(n, 0.0);
      ok = Renormalised(stages[s].weights, active, &seg.to);
      seg.from = seg.to;
    } else {
      ok = Continue(segs.back(), begin, stages[s].weights, stages[s].ramp_samples, active, &seg);
    }
    if (!ok) {
      return FailedPrecondition("mixture stage '" + stages[s].name +
                                "': every source it weights reached its max_epochs cap before it");
    }
    segs.push_back(seg);
    const double r = static_cast<double>(layout.stage_seq_length[s]) / L;
    for (size_t k = 0; k < n; ++k) stage_base[k] = seg.base[k];
    // What source k has given against its cap at x positions into segment `cur`.
    auto units = [&](const BlendSegment& cur, size_t k, int64_t x) {
      const double t = cur.Target(k, static_cast<double>(x));
      return uniform ? t : units_before[k] + (t - stage_base[k]) * r;
    };
    for (;;) {  // caps binding within this stage, earliest first
      const BlendSegment& cur = segs.back();
      int64_t first = end + 1;
      size_t who = n;
      for (size_t k = 0; k < n; ++k) {
        if (!active[k] || caps[k] < 0) continue;
        if (units(cur, k, end - cur.begin) < caps[k]) continue;
        int64_t lo = 0, hi = end - cur.begin;  // units(lo) < cap <= units(hi), or lo == 0
        if (units(cur, k, 0) >= caps[k]) hi = 0;
        while (hi - lo > 1) {
          const int64_t mid = lo + (hi - lo) / 2;
          (units(cur, k, mid) >= caps[k] ? hi : lo) = mid;
        }
        if (cur.begin + hi < first) first = cur.begin + hi, who = k;
      }
      if (who == n) break;
      active[who] = 0;
      plan.caps.push_back({static_cast<int>(who), static_cast<int>(s), first, sch.max_epochs[who]});
      if (first >= end) break;
      BlendSegment next;
      next.stage = static_cast<int>(s);
      const int64_t left =
          cur.ramp > first - cur.begin ? cur.ramp - (first - cur.begin) : int64_t{0};
      if (!Continue(cur, first, cur.to, left, active, &next)) {
        return FailedPrecondition("mixture stage '" + stages[s].name +
                                  "': every source it weights reached its max_epochs cap by "
                                  "position " +
                                  std::to_string(first));
      }
      segs.push_back(next);
    }
    PlanStageRow row;
    row.name = stages[s].name;
    row.begin = begin;
    row.samples = end - begin;
    row.ramp_samples = stages[s].ramp_samples;
    row.seq_length = layout.stage_seq_length[s];
    row.own_seq_length = sch.stages[s].seq_length > 0;
    row.weights = stages[s].weights;
    row.size_exponent = sch.stages[s].weights.empty() ? sch.stages[s].size_exponent : 0;
    row.from_temperature = sch.stages[s].from_temperature;
    for (size_t k = 0; k < n; ++k) {
      PlanCell c;
      const double t0 = CumulativeTarget(segs, k, begin), t1 = CumulativeTarget(segs, k, end);
      c.samples = t1 - t0;
      c.tokens = c.samples * static_cast<double>(row.seq_length);
      c.share = c.samples / static_cast<double>(end - begin);
      c.epochs = c.tokens / source_tokens[k];
      cum_tokens[k] += c.tokens;
      c.epochs_cumulative = (uniform ? t1 * L : cum_tokens[k]) / source_tokens[k];
      units_before[k] += c.samples * r;
      row.cells.push_back(c);
    }
    plan.tokens += static_cast<double>(end - begin) * static_cast<double>(row.seq_length);
    plan.stages.push_back(std::move(row));
  }
  for (size_t k = 0; k < n; ++k) {
    const double t = uniform ? CumulativeTarget(segs, k, layout.length) * L : cum_tokens[k];
    plan.total_tokens.push_back(t);
    plan.total_epochs.push_back(t / source_tokens[k]);
  }
  return plan;
}

std::string PlanText(const MixturePlan& p) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line),
                "mixture plan: %zu source(s), %zu stage(s), %lld samples of %lld tokens%s (%s "
                "tokens)\n",
                p.source_names.size(), p.stages.size(), static_cast<long long>(p.length),
                static_cast<long long>(p.seq_length),
                p.tokens == static_cast<double>(p.length) * static_cast<double>(p.seq_length)
                    ? ""
                    : " or a stage's own",
                Tokens(p.tokens).c_str());
  out += line;
  out += "sources (natural share = size / all sizes):\n";
  for (size_t k = 0; k < p.source_names.size(); ++k) {
    const std::string from = p.declared[k] ? " (declared: no store at its path)"
                             : p.declared_tokens[k] > 0
                                 ? " (its store's train part; the declared " +
                                       Tokens(p.declared_tokens[k]) + " not used)"
                                 : " (its store's train part)";
    std::snprintf(line, sizeof(line), "  %-12s %10s tokens  natural %.3f%s\n",
                  p.source_names[k].c_str(), Tokens(p.source_tokens[k]).c_str(), p.natural_share[k],
                  from.c_str());
    out += line;
  }
  for (const auto& st : p.stages) {
    std::snprintf(line, sizeof(line), "stage '%s': samples [%lld, %lld)", st.name.c_str(),
                  static_cast<long long>(st.begin), static_cast<long long>(st.begin + st.samples));
    out += line;
    if (st.own_seq_length) out += ", seq_length " + std::to_string(st.seq_length);
    if (st.ramp_samples > 0) out += ", ramp over " + std::to_string(st.ramp_samples) + " samples";
    if (st.size_exponent > 0) {
      out += st.from_temperature ? ", temperature " + Fixed(1 / st.size_exponent, 3)
                                 : ", alpha " + Fixed(st.size_exponent, 3);
      out += " (weights ~ size^" + Fixed(st.size_exponent, 3) + ")";
    }
    out += "\n";
    std::snprintf(line, sizeof(line), "  %-12s %8s %8s %8s %10s %12s %8s %8s  %s\n", "source",
                  "natural", "weight", "share", "tokens", "samples", "epochs", "cum.ep", "verdict");
    out += line;
    for (size_t k = 0; k < st.cells.size(); ++k) {
      const PlanCell& c = st.cells[k];
      std::snprintf(line, sizeof(line), "  %-12s %8.3f %8.3f %8.3f %10s %12.0f %8.3f %8.3f  %s\n",
                    p.source_names[k].c_str(), p.natural_share[k], st.weights[k], c.share,
                    Tokens(c.tokens).c_str(), c.samples, c.epochs, c.epochs_cumulative,
                    EpochVerdict(c.epochs_cumulative).c_str());
      out += line;
    }
  }
  for (const auto& c : p.caps) {
    std::snprintf(line, sizeof(line),
                  "cap: '%s' reaches max_epochs %g at sample %lld (stage '%s'); the others "
                  "share its weight from there\n",
                  p.source_names[static_cast<size_t>(c.source)].c_str(), c.max_epochs,
                  static_cast<long long>(c.position),
                  p.stages[static_cast<size_t>(c.stage)].name.c_str());
    out += line;
  }
  out += "run total:\n";
  for (size_t k = 0; k < p.source_names.size(); ++k) {
    std::snprintf(line, sizeof(line), "  %-12s %10s tokens %8.3f epochs  %s\n",
                  p.source_names[k].c_str(), Tokens(p.total_tokens[k]).c_str(), p.total_epochs[k],
                  EpochVerdict(p.total_epochs[k]).c_str());
    out += line;
  }
  return out;
}

std::string PlanJson(const MixturePlan& p) {
  nlohmann::json j;
  j["seq_length"] = p.seq_length;
  j["samples"] = p.length;
  j["tokens"] = p.tokens;
  nlohmann::json sources = nlohmann::json::array();
  for (size_t k = 0; k < p.source_names.size(); ++k) {
    sources.push_back({{"name", p.source_names[k]},
                       {"tokens", p.source_tokens[k]},
                       {"declared", static_cast<bool>(p.declared[k])},
                       {"size_from", p.declared[k] ? "declared" : "store"},
                       {"declared_tokens", p.declared_tokens[k]},
                       {"natural_share", p.natural_share[k]},
                       {"total_tokens", p.total_tokens[k]},
                       {"total_epochs", p.total_epochs[k]},
                       {"verdict", EpochVerdict(p.total_epochs[k])}});
  }
  j["sources"] = sources;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : p.stages) {
    nlohmann::json cells = nlohmann::json::array();
    for (size_t k = 0; k < st.cells.size(); ++k) {
      const PlanCell& c = st.cells[k];
      cells.push_back({{"source", p.source_names[k]},
                       {"weight", st.weights[k]},
                       {"share", c.share},
                       {"tokens", c.tokens},
                       {"samples", c.samples},
                       {"epochs", c.epochs},
                       {"epochs_cumulative", c.epochs_cumulative},
                       {"verdict", EpochVerdict(c.epochs_cumulative)}});
    }
    nlohmann::json s = {{"name", st.name},
                        {"begin", st.begin},
                        {"samples", st.samples},
                        {"ramp_samples", st.ramp_samples},
                        {"seq_length", st.seq_length},
                        {"sources", cells}};
    if (st.size_exponent > 0) s["size_exponent"] = st.size_exponent;
    stages.push_back(s);
  }
  j["stages"] = stages;
  nlohmann::json caps = nlohmann::json::array();
  for (const auto& c : p.caps) {
    caps.push_back({{"source", p.source_names[static_cast<size_t>(c.source)]},
                    {"stage", p.stages[static_cast<size_t>(c.stage)].name},
                    {"position", c.position},
                    {"max_epochs", c.max_epochs}});
  }
  j["caps"] = caps;
  return j.dump(2);
}

}  // namespace gridfeed::order
