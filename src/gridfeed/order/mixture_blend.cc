#include "gridfeed/order/mixture_blend.h"

#include <algorithm>
#include <cmath>

namespace gridfeed::order {

double BlendSegment::Weight(size_t k, double x) const {
  if (ramp == 0 || x >= static_cast<double>(ramp)) return to[k];
  return from[k] + (to[k] - from[k]) * (x / static_cast<double>(ramp));
}

double BlendSegment::Target(size_t k, double x) const {
  if (ramp == 0) return base[k] + to[k] * x;
  const double r = static_cast<double>(ramp);
  if (x <= r) return base[k] + from[k] * x + (to[k] - from[k]) * (x * x / (2 * r));
  return base[k] + (from[k] + to[k]) * (r / 2) + to[k] * (x - r);
}

namespace {

// Weights masked by the active sources, renormalised only when a mask removed weight (so an
// unmasked stage keeps its exact doubles). False when nothing is left.
bool Masked(const std::vector<double>& w, const std::vector<char>& active,
            std::vector<double>* out) {
  out->assign(w.size(), 0.0);
  double kept = 0;
  bool removed = false;
  for (size_t k = 0; k < w.size(); ++k) {
    if (active[k]) {
      (*out)[k] = w[k];
      kept += w[k];
    } else if (w[k] > 0) {
      removed = true;
    }
  }
  if (!(kept > 0)) return false;
  if (removed) {
    for (double& x : *out) x /= kept;
  }
  return true;
}

class Builder {
 public:
  Builder(const std::vector<BlendStage>& stages, const std::vector<int64_t>& caps)
      : stages_(stages), caps_(caps), n_(stages[0].weights.size()) {}

  Result<ScheduledBlend> Run() {
    int64_t length = 0;
    for (const auto& st : stages_) {
      out_.stage_begin.push_back(length);
      length += st.samples;
    }
    out_.stage_begin.push_back(length);
    out_.tables.dataset_index.resize(static_cast<size_t>(length));
    out_.tables.dataset_sample_index.resize(static_cast<size_t>(length));
    out_.counts.assign(n_, 0);
    used_.assign(n_, 0);
    active_.assign(n_, 1);
    for (size_t k = 0; k < n_; ++k) {
      if (caps_[k] == 0) {
        active_[k] = 0;
        out_.caps.push_back({static_cast<int>(k), 0, 0, 0});
      }
    }
    for (size_t s = 0; s < stages_.size(); ++s) {
      GRIDFEED_RETURN_IF_ERROR(StartStage(s));
      const int64_t end = out_.stage_begin[s + 1];
      for (int64_t p = out_.stage_begin[s]; p < end; ++p) {
        GRIDFEED_RETURN_IF_ERROR(Draw(p, end));
      }
    }
    const BlendSegment& last = out_.segments.back();
    for (size_t k = 0; k < n_; ++k) {
      out_.final_targets.push_back(last.Target(k, static_cast<double>(length - last.begin)));
    }
    return std::move(out_);
  }

 private:
  Status StartStage(size_t s) {
    const BlendStage& st = stages_[s];
    const int64_t begin = out_.stage_begin[s];
    BlendSegment seg;
    seg.begin = begin;
    seg.stage = static_cast<int>(s);
    if (!Masked(st.weights, active_, &seg.to)) return AllCapped(s, begin);
    if (s == 0) {
      seg.base.assign(n_, 0.0);
      seg.from = seg.to;
    } else {
      const BlendSegment& prev = out_.segments.back();
      const double x = static_cast<double>(begin - prev.begin);
      std::vector<double> now(n_);
      for (size_t k = 0; k < n_; ++k) {
        seg.base.push_back(prev.Target(k, x));
        now[k] = prev.Weight(k, x);
      }
      if (!Masked(now, active_, &seg.from)) seg.from = seg.to;
      seg.ramp = st.ramp_samples;
    }
    Push(std::move(seg));
    return Status::Ok();
  }

  void Push(BlendSegment seg) {
    out_.segments.push_back(std::move(seg));
    candidates_.clear();
    for (size_t k = 0; k < n_; ++k) {
      if (active_[k]) candidates_.push_back(k);
    }
  }

  Status Draw(int64_t p, int64_t stage_end) {
    const BlendSegment& seg = out_.segments.back();
    const double q = static_cast<double>(std::max<int64_t>(p, 1) - seg.begin);
    size_t best = n_;
    double best_error = 0;
    for (size_t k : candidates_) {
      const double error = seg.Target(k, q) - static_cast<double>(out_.counts[k]);
      // A source without weight here is drawn only while it is owed samples (never on a tie
      // at 0, which Megatron's rule would give to the first source).
      if (!(error > 0) && !(seg.Weight(k, q) > 0)) continue;
      if (best == n_ || error > best_error) {
        best_error = error;
        best = k;
      }
    }
    if (best == n_) return AllCapped(static_cast<size_t>(seg.stage), p);
    out_.tables.dataset_index[p] = static_cast<int32_t>(best);
    out_.tables.dataset_sample_index[p] = out_.counts[best];
    ++out_.counts[best];
    used_[best] += stages_[static_cast<size_t>(seg.stage)].cap_cost;
    if (caps_[best] >= 0 && used_[best] >= caps_[best]) {
      active_[best] = 0;
      out_.caps.push_back({static_cast<int>(best), seg.stage, p + 1, out_.counts[best]});
      if (p + 1 < stage_end) return Recap(p + 1);
    }
    return Status::Ok();
  }

  // A cap bound: a new segment from `begin` without the capped source.
  Status Recap(int64_t begin) {
    const BlendSegment& prev = out_.segments.back();
    const double x = static_cast<double>(begin - prev.begin);
    BlendSegment seg;
    seg.begin = begin;
    seg.stage = prev.stage;
    std::vector<double> now(n_);
    for (size_t k = 0; k < n_; ++k) {
      seg.base.push_back(prev.Target(k, x));
      now[k] = prev.Weight(k, x);
    }
    if (!Masked(prev.to, active_, &seg.to))
      return AllCapped(static_cast<size_t>(prev.stage), begin);
    if (prev.ramp > 0 && x < static_cast<double>(prev.ramp)) {
      if (!Masked(now, active_, &seg.from)) seg.from = seg.to;
      seg.ramp = prev.ramp - (begin - prev.begin);
    } else {
      seg.from = seg.to;
    }
    Push(std::move(seg));
    return Status::Ok();
  }

  Status AllCapped(size_t s, int64_t position) const {
    return FailedPrecondition("mixture stage '" + stages_[s].name + "': every source it weights " +
                              "reached its max_epochs cap by position " + std::to_string(position) +
                              " (the stage ends at " + std::to_string(out_.stage_begin[s + 1]) +
                              "); raise max_epochs or shorten the stage");
  }

  const std::vector<BlendStage>& stages_;
  const std::vector<int64_t>& caps_;
  size_t n_;
  ScheduledBlend out_;
  std::vector<char> active_;
  std::vector<int64_t> used_;  // cap units given per source
  std::vector<size_t> candidates_;
};

}  // namespace

Result<ScheduledBlend> BuildScheduledBlend(const std::vector<BlendStage>& stages,
                                           const std::vector<int64_t>& caps) {
  if (stages.empty()) return InvalidArgument("a mixture schedule needs a stage");
  const size_t n = stages[0].weights.size();
  if (n == 0 || caps.size() != n) return InvalidArgument("a mixture needs its sources' caps");
  for (const auto& st : stages) {
    double sum = 0;
    for (double w : st.weights) {
      if (!(w >= 0) || !std::isfinite(w)) sum = -1;
      if (sum >= 0) sum += w;
    }
    if (!(sum > 0)) {
      return InvalidArgument("mixture stage '" + st.name +
                             "': weights must be finite, >= 0 and not all 0");
    }
    if (st.weights.size() != n || st.samples <= 0 || st.ramp_samples < 0 ||
        st.ramp_samples > st.samples || st.cap_cost < 1) {
      return InvalidArgument("mixture stage '" + st.name +
                             "': needs a weight per source, samples > 0 and a ramp within it");
    }
  }
  return Builder(stages, caps).Run();
}

double CumulativeTarget(const std::vector<BlendSegment>& segments, size_t k, int64_t q) {
  auto it = std::upper_bound(segments.begin(), segments.end(), q,
                             [](int64_t v, const BlendSegment& s) { return v < s.begin; });
  const BlendSegment& s = it == segments.begin() ? segments.front() : *(it - 1);
  return s.Target(k, static_cast<double>(q - s.begin));
}

}  // namespace gridfeed::order
