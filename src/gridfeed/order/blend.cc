#include "gridfeed/order/blend.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <stop_token>

#include "gridfeed/core/page_array.h"

namespace gridfeed::order {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kStopCheck = int64_t{1} << 16;  // positions between looks at the stop token

// Megatron's rule as helpers.cpp states it: every source at every position. Used where the
// fast path's preconditions (below) do not hold.
void ScanEverySource(const std::vector<double>& weights, int64_t size, BlendTables* t,
                     const std::stop_token& stop) {
  const size_t k_count = weights.size();
  std::vector<int64_t> counts(k_count, 0);
  for (int64_t p = 0; p < size; ++p) {
    if (p % kStopCheck == 0 && stop.stop_requested()) return;
    const double q = static_cast<double>(std::max<int64_t>(p, 1));
    size_t best = 0;
    double best_error = weights[0] * q - static_cast<double>(counts[0]);
    for (size_t k = 1; k < k_count; ++k) {
      const double error = weights[k] * q - static_cast<double>(counts[k]);
      if (error > best_error) {
        best_error = error;
        best = k;
      }
    }
    t->dataset_index[p] = static_cast<int32_t>(best);
    t->dataset_sample_index[p] = counts[best];
    ++counts[best];
  }
}

// The same choices without scanning every source at every position.
//
// Notation: q = max(p, 1) and e_k = fl(fl(w_k * q) - c_k), the double the reference compares
// (c_k: samples of k so far, an exact integer in a double). The reference picks the lowest k
// with the largest e_k.
//
// 1. Groups. Sources with the same weight (the same double) form a group, members in index
//    order. Only a group's first member with the group's largest error can be picked, so the
//    group is picked round-robin: members [0, ptr) hold cnt + 1 samples, [ptr, G) hold cnt,
//    and its representative is member ptr. Exactness: with a = fl(w * q), the members' errors
//    are fl(a - cnt) and fl(a - cnt - 1); both reals lie below 2^51 in magnitude (the
//    preconditions: w <= 2^10, size <= 2^40), where doubles are at most 1/4 apart, so
//    fl(a - cnt) > fl(a - cnt - 1) strictly (rounding is monotone and cannot merge reals 1
//    apart). The group's largest error is therefore E_g = fl(fl(w * q) - cnt), reached first by
//    member ptr, and the reference's pick is the representative of the group with the largest
//    E_g, the lowest representative index on ties. Everything below works on groups.
// 2. Upper bounds. For w >= 0, fl(w * q) is non-decreasing in q (q exact, rounding monotone)
//    and fl(a - cnt) is non-decreasing in a and non-increasing in cnt. So over a block of
//    positions [p0, p1), U_g = E_g evaluated at q1 = max(p1 - 1, 1) with the group's count at
//    p0 bounds E_g at every position of the block, whatever the group is picked meanwhile.
// 3. Candidates. A block keeps the groups with U_g >= cut (the candidates) and
//    H = max U_g over the others. At each position the exact E_g are computed for the
//    candidates only, giving the best (largest E, lowest representative on ties) among them.
//    If that E is > H, every other group's E_g <= U_g <= H is strictly smaller: the candidate
//    is the reference's pick, ties included. Otherwise the position falls back to the enclosing
//    level (below) and the block ends.
// 4. Two levels. An outer block selects its candidates from every group; the inner blocks
//    inside it select theirs from the outer candidates only, with H the larger of the inner
//    others' bounds and the outer H (every group outside the inner candidates is covered by one
//    of them over the inner block). A miss scans the outer candidates against the outer H, and
//    a miss there scans every group (the reference over groups). The cuts are only guesses
//    (the smallest largest-error of the previous block less a margin that doubles after a
//    miss); they decide the speed, never the result.
class FastGreedy {
 public:
  explicit FastGreedy(const std::vector<double>& weights) {
    std::vector<int32_t> order(weights.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return weights[a] < weights[b]; });
    members_ = order;
    for (size_t i = 0; i < order.size();) {
      size_t j = i + 1;
      while (j < order.size() && weights[order[j]] == weights[order[i]]) ++j;
      begin_.push_back(static_cast<int64_t>(i));
      size_.push_back(static_cast<int64_t>(j - i));
      ptr_.push_back(0);
      w_.push_back(weights[order[i]]);
      cnt_.push_back(0.0);
      count_.push_back(0);
      rep_.push_back(order[i]);
      i = j;
    }
  }

  void Run(int64_t size, BlendTables* t, const std::stop_token& stop) {
    const size_t v = w_.size();
    std::vector<uint32_t> all(v), outer(v), inner(v);
    std::iota(all.begin(), all.end(), 0u);
    const double mean_w = std::accumulate(w_.begin(), w_.end(), 0.0) / static_cast<double>(v);
    // Two levels of blocks: an outer block selects from every group, the inner blocks within it
    // select from the outer candidates (lengths balance each level's pass against the scans).
    const int64_t outer_len =
        std::max<int64_t>(8, static_cast<int64_t>(4 * std::sqrt(static_cast<double>(v))));
    const int64_t inner_len =
        std::max<int64_t>(4, static_cast<int64_t>(2 * std::sqrt(static_cast<double>(outer_len))));
    double outer_margin = mean_w * static_cast<double>(outer_len);
    double inner_margin = mean_w * static_cast<double>(inner_len);
    // The smallest largest-error seen in the last outer and inner block.
    double outer_floor = kNegInf, inner_floor = kNegInf;
    auto q_at = [](int64_t p) { return static_cast<double>(std::max<int64_t>(p, 1)); };
    int64_t p = 0, next_look = kStopCheck;
    while (p < size) {
      if (p >= next_look) {
        if (stop.stop_requested()) return;
        next_look = p + kStopCheck;
      }
      if (v <= kFewGroups || outer_floor == kNegInf) {
        double e;
        const uint32_t g = Best(all.data(), v, q_at(p), &e);
        Take(g, p++, t);
        outer_floor = inner_floor = e;
        continue;
      }
      const int64_t outer_end = std::min(size, p + outer_len);
      size_t n_outer;
      const double h_outer = Select(all.data(), v, q_at(outer_end - 1), outer_floor - outer_margin,
                                    outer.data(), &n_outer);
      double outer_min = std::numeric_limits<double>::infinity();
      bool outer_missed = false;
      while (p < outer_end && !outer_missed) {
        const int64_t inner_end = std::min(outer_end, p + inner_len);
        size_t n_inner;
        double h = Select(outer.data(), n_outer, q_at(inner_end - 1), inner_floor - inner_margin,
                          inner.data(), &n_inner);
        h = h > h_outer ? h : h_outer;  // every group outside the inner candidates
        double inner_min = std::numeric_limits<double>::infinity();
        bool inner_missed = false;
        while (p < inner_end) {
          const double q = q_at(p);
          double e;
          uint32_t g = Best(inner.data(), n_inner, q, &e);
          if (!(e > h)) {
            inner_missed = true;
            g = Best(outer.data(), n_outer, q, &e);
            if (!(e > h_outer)) {
              outer_missed = true;
              g = Best(all.data(), v, q, &e);
            }
          }
          Take(g, p++, t);
          inner_min = std::min(inner_min, e);
          if (inner_missed) break;
        }
        inner_floor = inner_min;
        inner_margin = inner_missed ? 2 * inner_margin : std::max(mean_w, inner_margin * 0.9);
        outer_min = std::min(outer_min, inner_min);
      }
      outer_floor = outer_min;
      outer_margin = outer_missed ? 2 * outer_margin : std::max(mean_w, outer_margin * 0.9);
    }
  }

  static constexpr size_t kFewGroups = 8;

 private:
  // The groups of ids[0, n) whose error at q_last with their current count is >= cut, in
  // order, into out (*n_out of them); returns the largest such bound among the others (-inf if
  // none). Branch-free, as it runs over every group once per outer block.
  double Select(const uint32_t* ids, size_t n, double q_last, double cut, uint32_t* out,
                size_t* n_out) const {
    size_t n_cand = 0;
    double h0 = kNegInf, h1 = kNegInf;
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
      const uint32_t g0 = ids[i], g1 = ids[i + 1];
      const double u0 = w_[g0] * q_last - cnt_[g0], u1 = w_[g1] * q_last - cnt_[g1];
      const bool c0 = u0 >= cut, c1 = u1 >= cut;
      out[n_cand] = g0;
      n_cand += c0;
      out[n_cand] = g1;
      n_cand += c1;
      const double o0 = c0 ? kNegInf : u0, o1 = c1 ? kNegInf : u1;
      h0 = o0 > h0 ? o0 : h0;
      h1 = o1 > h1 ? o1 : h1;
    }
    for (; i < n; ++i) {
      const uint32_t g = ids[i];
      const double u = w_[g] * q_last - cnt_[g];
      const bool c = u >= cut;
      out[n_cand] = g;
      n_cand += c;
      const double o = c ? kNegInf : u;
      h0 = o > h0 ? o : h0;
    }
    *n_out = n_cand;
    return h0 > h1 ? h0 : h1;
  }

  // The group with the largest error at q, the lowest representative on ties.
  uint32_t Best(const uint32_t* ids, size_t n, double q, double* best_error) const {
    uint32_t best = 0;
    int32_t best_rep = std::numeric_limits<int32_t>::max();
    double best_e = kNegInf;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t g = ids[i];
      const double e = w_[g] * q - cnt_[g];
      if (e > best_e || (e == best_e && rep_[g] < best_rep)) {
        best_e = e;
        best = g;
        best_rep = rep_[g];
      }
    }
    *best_error = best_e;
    return best;
  }

  void Take(uint32_t g, int64_t p, BlendTables* t) {
    t->dataset_index[p] = rep_[g];
    t->dataset_sample_index[p] = count_[g];
    if (++ptr_[g] == size_[g]) {
      ptr_[g] = 0;
      ++count_[g];
      cnt_[g] = static_cast<double>(count_[g]);
    }
    rep_[g] = members_[static_cast<size_t>(begin_[g] + ptr_[g])];
  }

  std::vector<int32_t> members_;  // source indices by (weight, index)
  std::vector<int64_t> begin_, size_, ptr_, count_;
  std::vector<double> w_, cnt_;
  std::vector<int32_t> rep_;
};

// Below this many sources the plain scan is faster (measured: about equal at 100 sources).
constexpr size_t kMinFastSources = 96;

// Where the fast path's argument holds: finite weights in [0, 2^10], at most 2^40 positions.
bool FastPathApplies(const std::vector<double>& weights, int64_t size) {
  if (weights.size() < kMinFastSources || size > (int64_t{1} << 40)) return false;
  return std::all_of(weights.begin(), weights.end(),
                     [](double w) { return w >= 0 && w <= 1024.0; });
}

}  // namespace

BlendTables BuildBlendingIndices(const std::vector<double>& weights, int64_t size,
                                 std::stop_token stop) {
  BlendTables t;
  ResizeOnHugePages(&t.dataset_index, static_cast<size_t>(size));
  ResizeOnHugePages(&t.dataset_sample_index, static_cast<size_t>(size));
  if (size <= 0) return t;
  if (FastPathApplies(weights, size)) {
    FastGreedy(weights).Run(size, &t, stop);
  } else {
    ScanEverySource(weights, size, &t, stop);
  }
  return t;
}
BlendTables BuildExhaustiveBlendingIndices(const std::vector<int64_t>& sizes) {
  BlendTables t;
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::vector<double> weights(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    weights[k] = static_cast<double>(sizes[k]) / static_cast<double>(total);
  }
  std::vector<int64_t> counts(sizes.size(), 0);
  std::vector<size_t> active;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] > 0) active.push_back(k);
  }
  ResizeOnHugePages(&t.dataset_index, static_cast<size_t>(total));
  ResizeOnHugePages(&t.dataset_sample_index, static_cast<size_t>(total));
  for (int64_t p = 0; p < total; ++p) {
    const double q = static_cast<double>(std::max<int64_t>(p, 1));
    size_t best_pos = 0;
    double best_error = weights[active[0]] * q - static_cast<double>(counts[active[0]]);
    for (size_t i = 1; i < active.size(); ++i) {
      const size_t k = active[i];
      const double error = weights[k] * q - static_cast<double>(counts[k]);
      if (error > best_error) {
        best_error = error;
        best_pos = i;
      }
    }
    const size_t best = active[best_pos];
    t.dataset_index[p] = static_cast<int32_t>(best);
    t.dataset_sample_index[p] = counts[best];
    if (++counts[best] == sizes[best])
      active.erase(active.begin() + static_cast<ptrdiff_t>(best_pos));
  }
  return t;
}

}  // namespace gridfeed::order
