#include "gridfeed/order/mixture/mixture_blend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "gridfeed/core/page_array.h"

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
    ResizeOnHugePages(&out_.tables.dataset_index, static_cast<size_t>(length));
    ResizeOnHugePages(&out_.tables.dataset_sample_index, static_cast<size_t>(length));
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
      for (int64_t p = out_.stage_begin[s]; p < end;) {
        GRIDFEED_ASSIGN_OR_RETURN(p, DrawSegment(p, end));
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

  // Also loads the segment's active sources into the dense arrays the draw loops read.
  void Push(BlendSegment seg) {
    out_.segments.push_back(std::move(seg));
    const BlendSegment& g = out_.segments.back();
    const double r = static_cast<double>(g.ramp);
    idx_.clear();
    base_.clear();
    level_.clear();
    from_.clear();
    slope_.clear();
    to_.clear();
    positive_.clear();
    count_.clear();
    count_d_.clear();
    used_d_.clear();
    cap_.clear();
    for (size_t k = 0; k < n_; ++k) {
      if (!active_[k]) continue;
      idx_.push_back(k);
      base_.push_back(g.base[k]);
      // Target's terms, each formed as Target forms it, so the sums round the same.
      level_.push_back(g.ramp == 0 ? g.base[k] : g.base[k] + (g.from[k] + g.to[k]) * (r / 2));
      from_.push_back(g.from[k]);
      slope_.push_back(g.to[k] - g.from[k]);
      to_.push_back(g.to[k]);
      positive_.push_back(g.to[k] > 0);
      count_.push_back(out_.counts[k]);
      count_d_.push_back(static_cast<double>(out_.counts[k]));
      used_d_.push_back(used_[k]);
      cap_.push_back(caps_[k]);
    }
  }

  // Draws positions [p, end) of the current segment until it ends or a cap starts a new one;
  // returns the next position. Per position this is BlendSegment::Target and Weight inlined
  // over the dense arrays, split into the ramp (x <= ramp) and the linear part.
  Result<int64_t> DrawSegment(int64_t p, int64_t end) {
    const BlendSegment& seg = out_.segments.back();
    const int64_t ramp_end = seg.ramp > 0 ? std::min(end, seg.begin + seg.ramp + 1) : p;
    const double r = static_cast<double>(seg.ramp);
    const size_t m = idx_.size();
    const int64_t cost = stages_[static_cast<size_t>(seg.stage)].cap_cost;
    size_t capped_i = m;  // the source whose draw reached its cap
    const bool all_positive =
        std::all_of(positive_.begin(), positive_.end(), [](char c) { return c != 0; });
    // Position p's draw given its error function; false when no source is eligible.
    auto draw = [&](int64_t pos, auto&& error_of, auto&& eligible) {
      // Errors are finite, so -inf makes the first eligible source the first best, as in
      // Megatron; no branch on the error's sign where every weight is positive.
      size_t best = m;
      double best_error = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < m; ++i) {
        double error = error_of(i) - static_cast<double>(count_[i]);
        // A source without weight here is drawn only while it is owed samples (never on a
        // tie at 0, which Megatron's rule would give to the first source).
        if (!(error > 0 || eligible(i))) error = -std::numeric_limits<double>::infinity();
        if (error > best_error) {
          best_error = error;
          best = i;
        }
      }
      if (best == m) return false;
      Record(pos, best, cost, &capped_i);
      return true;
    };
    // The ramp, and a short or few-source linear part: every source at every position.
    const int64_t scan_end = m > kFewSources ? std::min(end, ramp_end) : end;
    for (; p < scan_end && capped_i == m; ++p) {
      const double x = static_cast<double>(std::max<int64_t>(p, 1) - seg.begin);
      bool ok;
      if (p < ramp_end) {
        const double t = x * x / (2 * r);
        ok = draw(
            p, [&](size_t i) { return base_[i] + from_[i] * x + slope_[i] * t; },
            [&](size_t i) { return seg.Weight(idx_[i], x) > 0; });
      } else {
        // Past the ramp (or without one) the target is linear: level + to * y.
        const double y = seg.ramp == 0 ? x : x - r;
        auto linear = [&](size_t i) { return level_[i] + to_[i] * y; };
        ok = all_positive ? draw(p, linear, [](size_t) { return true; })
                          : draw(p, linear, [&](size_t i) { return positive_[i] != 0; });
      }
      if (!ok) {
        SaveCounts();
        return AllCapped(static_cast<size_t>(seg.stage), p);
      }
    }
    if (p < end && capped_i == m && !DrawLinearBlocks(&p, end, cost, &capped_i)) {
      SaveCounts();
      return AllCapped(static_cast<size_t>(seg.stage), p);
    }
    SaveCounts();
    if (capped_i == m) return p;
    // p is one past the position whose draw reached the cap.
    const size_t k = idx_[capped_i];
    active_[k] = 0;
    out_.caps.push_back({static_cast<int>(k), seg.stage, p, out_.counts[k]});
    if (p < end) GRIDFEED_RETURN_IF_ERROR(Recap(p));  // replaces seg and the dense arrays
    return p;
  }

  void Record(int64_t pos, size_t best, int64_t cost, size_t* capped_i) {
    out_.tables.dataset_index[pos] = static_cast<int32_t>(idx_[best]);
    out_.tables.dataset_sample_index[pos] = count_[best];
    ++count_[best];
    count_d_[best] = static_cast<double>(count_[best]);
    used_d_[best] += cost;
    if (cap_[best] >= 0 && used_d_[best] >= cap_[best]) *capped_i = best;
  }

  // The linear part's error of dense source i at y positions past the ramp (past begin without
  // one), exactly as DrawSegment's scan forms it; -inf where the source is not eligible.
  double LinearError(size_t i, double y) const {
    const double error = (level_[i] + to_[i] * y) - count_d_[i];
    return error > 0 || positive_[i] ? error : -std::numeric_limits<double>::infinity();
  }

  // The first dense source with the largest LinearError among ids[0, n) (ascending).
  size_t BestLinear(const uint32_t* ids, size_t n, double y, double* best_error) const {
    size_t best = idx_.size();
    double best_e = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < n; ++j) {
      const double e = LinearError(ids[j], y);
      if (e > best_e) {
        best_e = e;
        best = ids[j];
      }
    }
    *best_error = best_e;
    return best;
  }

  // Positions [*p, end) of the current segment's linear part (past its ramp) without scanning
  // every source at every position; stops after a draw that reaches a cap (*capped_i) and
  // returns false, *p at that position, when no source is eligible there. The same draws as
  // the scan in DrawSegment, by the argument of blend.cc's FastGreedy, without the groups:
  //  - for a fixed count, LinearError is non-decreasing in the position: y is, to >= 0 so
  //    fl(to * y) is, and fl(level + .) and fl(. - count) are monotone; a source with to == 0
  //    has level + 0 * y == level, a constant error, and a constant eligibility. A larger count
  //    gives a smaller or equal error and never makes an ineligible source eligible. So a
  //    source's LinearError at a block's last position with its count at the block's start
  //    bounds it at every position of the block.
  //  - a block keeps the sources whose bound reaches a cut (ascending, so the first on ties is
  //    found) and H, the largest other bound; a best candidate with an error > H is the scan's
  //    choice (every other source is strictly below it), otherwise that position scans every
  //    source and the block ends. The cut only decides the speed.
  bool DrawLinearBlocks(int64_t* p_io, int64_t end, int64_t cost, size_t* capped_i) {
    const BlendSegment& seg = out_.segments.back();
    const double r = static_cast<double>(seg.ramp);
    const size_t m = idx_.size();
    auto y_at = [&](int64_t pos) {
      const double x = static_cast<double>(std::max<int64_t>(pos, 1) - seg.begin);
      return seg.ramp == 0 ? x : x - r;
    };
    all_.resize(m);
    std::iota(all_.begin(), all_.end(), 0u);
    cand_.resize(m);
    bound_.resize(m);
    double mean_w = 0;
    for (size_t i = 0; i < m; ++i) mean_w += to_[i];
    mean_w /= static_cast<double>(m);
    const int64_t block =
        std::max<int64_t>(4, static_cast<int64_t>(kBlockFactor * std::sqrt(m / 2.0)));
    double margin = mean_w * static_cast<double>(block);
    double floor_m = -std::numeric_limits<double>::infinity();
    int64_t p = *p_io;
    while (p < end && *capped_i == m) {
      if (floor_m == -std::numeric_limits<double>::infinity()) {
        double e;
        const size_t best = BestLinear(all_.data(), m, y_at(p), &e);
        if (best == m) {
          *p_io = p;
          return false;
        }
        Record(p++, best, cost, capped_i);
        floor_m = e;
        continue;
      }
      const int64_t block_end = std::min(end, p + block);
      const double y_last = y_at(block_end - 1);
      const double cut = floor_m - margin;
      // LinearError at y_last, branch-free.
      for (size_t i = 0; i < m; ++i) {
        const double e = (level_[i] + to_[i] * y_last) - count_d_[i];
        bound_[i] = (e > 0) | (positive_[i] != 0) ? e : -std::numeric_limits<double>::infinity();
      }
      size_t n_cand = 0;
      double h0 = -std::numeric_limits<double>::infinity(), h1 = h0;
      size_t i = 0;
      for (; i + 1 < m; i += 2) {
        const double u0 = bound_[i], u1 = bound_[i + 1];
        const bool c0 = u0 >= cut, c1 = u1 >= cut;
        cand_[n_cand] = static_cast<uint32_t>(i);
        n_cand += c0;
        cand_[n_cand] = static_cast<uint32_t>(i + 1);
        n_cand += c1;
        const double o0 = c0 ? -std::numeric_limits<double>::infinity() : u0;
        const double o1 = c1 ? -std::numeric_limits<double>::infinity() : u1;
        h0 = o0 > h0 ? o0 : h0;
        h1 = o1 > h1 ? o1 : h1;
      }
      for (; i < m; ++i) {
        const bool c = bound_[i] >= cut;
        cand_[n_cand] = static_cast<uint32_t>(i);
        n_cand += c;
        const double o = c ? -std::numeric_limits<double>::infinity() : bound_[i];
        h0 = o > h0 ? o : h0;
      }
      const double h = h0 > h1 ? h0 : h1;
      double min_m = std::numeric_limits<double>::infinity();
      bool missed = false;
      while (p < block_end && *capped_i == m) {
        const double y = y_at(p);
        double e;
        size_t best = BestLinear(cand_.data(), n_cand, y, &e);
        if (!(e > h)) {
          best = BestLinear(all_.data(), m, y, &e);
          missed = true;
          if (best == m) {
            *p_io = p;
            return false;
          }
        }
        Record(p++, best, cost, capped_i);
        min_m = std::min(min_m, e);
        if (missed) break;
      }
      floor_m = min_m;
      margin = missed ? 2 * margin : std::max(mean_w, margin * 0.9);
    }
    *p_io = p;
    return true;
  }

  void SaveCounts() {
    for (size_t i = 0; i < idx_.size(); ++i) {
      out_.counts[idx_[i]] = count_[i];
      used_[idx_[i]] = used_d_[i];
    }
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
  // The current segment's active sources, dense, in source order (ties go to the first).
  std::vector<size_t> idx_;
  std::vector<double> base_, level_, from_, slope_, to_;
  std::vector<char> positive_;
  std::vector<int64_t> count_, used_d_, cap_;  // samples, cap units given, cap
  std::vector<int64_t> used_;                  // cap units given per source (saved)
  std::vector<double> count_d_;                // count_ as doubles (exact)
  std::vector<uint32_t> all_, cand_;           // DrawLinearBlocks' scratch
  std::vector<double> bound_;
  static constexpr size_t kFewSources = 96;  // below it the scan is faster
  static constexpr double kBlockFactor = 2.0;
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
