// The blend table of a mixture schedule: Megatron's greedy blending rule (blend.h) generalised
// to target weights that change over the positions. Each source k has a cumulative target
// T_k(q), the integral of its weight over the first q positions (piecewise: constant within a
// stage, linear over a ramp); position p goes to the eligible source with the largest
// T_k(max(p, 1)) - (samples of k drawn so far), the first on ties, as in Megatron. Eligible:
// not capped, and weight > 0 at that position or still owed samples (a positive gap). A source that
// reaches its cap (max_epochs worth of samples) drops to weight 0 from the next position and the
// others' weights are renormalised. One stage without ramp or caps gives exactly
// BuildBlendingIndices' tables (same doubles in the same order of operations). Past a ramp, a
// segment of more than 96 sources scans only the sources whose error can reach the largest
// (the same choices; mixture_blend.cc's DrawLinearBlocks says why); ramps scan every source.
// Pure; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/blend.h"

namespace gridfeed::order {

// A stage resolved to positions.
struct BlendStage {
  std::string name;
  int64_t samples = 0;          // positions of this stage (> 0)
  std::vector<double> weights;  // per source, normalised (sum 1; Megatron's Normalize)
  int64_t ramp_samples = 0;     // linear ramp from the previous weights; <= samples
  int64_t cap_cost = 1;         // what one of its samples counts against a cap (e.g. tokens)
};

// A piece of the cumulative target on which every weight is linear in the position.
struct BlendSegment {
  int64_t begin = 0;  // first position
  int stage = 0;
  std::vector<double> base;      // T_k(begin)
  std::vector<double> from, to;  // weights at `begin` and after the ramp
  int64_t ramp = 0;              // positions from `from` to `to` (0: `to` throughout)
  // Weight of source k at x positions after begin, and T_k(begin + x).
  double Weight(size_t k, double x) const;
  double Target(size_t k, double x) const;
};

struct CapEvent {
  int source = 0;
  int stage = 0;
  int64_t position = 0;  // first position at which the source has weight 0
  int64_t samples = 0;   // its samples then (= its cap)
};

struct ScheduledBlend {
  BlendTables tables;
  std::vector<int64_t> counts;         // samples drawn per source
  std::vector<double> final_targets;   // T_k(length)
  std::vector<BlendSegment> segments;  // in position order
  std::vector<int64_t> stage_begin;    // first position of each stage, then the length
  std::vector<CapEvent> caps;          // in position order
};

// caps[k]: what source k may give (-1: no cap), in the units of the stages' cap_cost (1: samples);
// it is capped once its samples' costs reach caps[k]. FailedPrecondition names the stage
// when every source it weights is capped before the stage ends.
Result<ScheduledBlend> BuildScheduledBlend(const std::vector<BlendStage>& stages,
                                           const std::vector<int64_t>& caps);

// T_k(q) over the segments (q >= 0), as the builder saw it.
double CumulativeTarget(const std::vector<BlendSegment>& segments, size_t k, int64_t q);

}  // namespace gridfeed::order
