// A mixture schedule laid out along the train split (mixture_pipeline.h): stage boundaries,
// ramps and bounds, the sources' distinctness, and temperature weights.
#include <algorithm>
#include <cmath>
#include <string>

#include "gridfeed/io/file_util.h"
#include "gridfeed/order/mixture/mixture_pipeline.h"

namespace gridfeed::order {
namespace {

constexpr int64_t kMaxLength = int64_t{1} << 40;

std::string StageKey(size_t i) { return "schedule[" + std::to_string(i) + "]"; }

}  // namespace

Status CheckDistinctStores(const config::MixtureSchedule& s) {
  // dev:inode (with size and mtime) of each source's .idx and .bin; absent files are left to
  // the store's own open, which names them.
  std::vector<std::vector<std::string>> ids;
  for (size_t k = 0; k < s.sources.size(); ++k) {
    const auto& src = s.sources[k];
    ids.emplace_back();
    for (const char* ext : {".idx", ".bin"}) {
      auto id = io::FileIdentity(src.path + ext);
      if (id.ok()) ids.back().push_back(std::string(ext) + " " + *id);
    }
    for (size_t j = 0; j < k; ++j) {
      for (const auto& id : ids.back()) {
        if (std::find(ids[j].begin(), ids[j].end(), id) == ids[j].end()) continue;
        return InvalidArgument("mixture schedule: sources." + src.name + ".path '" + src.path +
                               "' is the token store of source '" + s.sources[j].name + "' ('" +
                               s.sources[j].path + "'): the same " + id.substr(0, 4) +
                               " file under another name; their samples would repeat");
      }
    }
  }
  return Status::Ok();
}

int MixtureLayout::StageAt(int64_t position) const {
  const auto it = std::upper_bound(stage_begin.begin(), stage_begin.end() - 1, position);
  return std::max(0, static_cast<int>(it - stage_begin.begin()) - 1);
}

Result<MixtureLayout> LayoutMixture(const config::JobOptions& o) {
  MixtureLayout l;
  GRIDFEED_ASSIGN_OR_RETURN(l.schedule, config::ParseMixtureSchedule(o.data.mixture_schedule));
  l.seq_length = o.data.seq_length;
  if (l.seq_length <= 0) return InvalidArgument("--seq-length must be positive");
  l.extra_token = o.data.no_add_extra_token ? 0 : 1;
  l.global_batch_size =
      o.batch.global_batch_size
          ? o.batch.global_batch_size
          : o.batch.micro_batch_size * std::max<int64_t>(1, o.grid.data_parallel_size);
  int64_t L = l.seq_length;  // the stage's
  auto to_samples = [&](config::BudgetUnit unit, int64_t n,
                        const std::string& key) -> Result<int64_t> {
    if (unit == config::BudgetUnit::kTokens) return n / L + (n % L != 0);
    if (unit == config::BudgetUnit::kSamples) return n;
    if (n > kMaxLength / std::max<int64_t>(1, l.global_batch_size)) {
      return InvalidArgument("mixture schedule: " + key + " x --global-batch-size is too large");
    }
    return n * l.global_batch_size;
  };
  double tokens = 0;
  for (size_t i = 0; i < l.schedule.stages.size(); ++i) {
    const auto& st = l.schedule.stages[i];
    L = st.seq_length > 0 ? st.seq_length : l.seq_length;
    const std::string key = StageKey(i) + "." + config::BudgetUnitName(st.unit);
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, to_samples(st.unit, st.budget, key));
    GRIDFEED_ASSIGN_OR_RETURN(int64_t r, to_samples(st.ramp_unit, st.ramp, key));
    if (r > n) {
      return InvalidArgument("mixture schedule: " + StageKey(i) + ".ramp_" +
                             config::BudgetUnitName(st.ramp_unit) + " is " + std::to_string(r) +
                             " samples, longer than the stage's " + std::to_string(n));
    }
    l.stage_begin.push_back(l.length);
    l.stage_samples.push_back(n);
    l.ramp_samples.push_back(r);
    l.stage_seq_length.push_back(L);
    l.length += n;
    tokens += static_cast<double>(n) * static_cast<double>(L);
    if (l.length > kMaxLength || tokens > static_cast<double>(kMaxMixtureTokens)) {
      return InvalidArgument(
          "mixture schedule: the stages add up to more than 2^40 samples or "
          "2^62 tokens at " +
          key);
    }
  }
  l.stage_begin.push_back(l.length);
  return l;
}

std::vector<double> SizeWeights(const std::vector<double>& source_tokens, double exponent) {
  std::vector<double> raw;
  double sum = 0;
  for (double t : source_tokens) {
    raw.push_back(t > 0 ? std::pow(t, exponent) : 0.0);
    sum += raw.back();
  }
  if (std::isfinite(sum)) return raw;  // as always: the same doubles as before log space
  // size^exponent overflows (e.g. temperature 0.01 = exponent 100): relative to the largest
  // source, exp(exponent x (ln size - ln largest)) <= 1, the same weights once normalised.
  double largest = 0;
  for (double t : source_tokens) largest = std::max(largest, t);
  raw.clear();
  const double log_largest = std::log(largest);
  for (double t : source_tokens) {
    if (!(t > 0)) {
      raw.push_back(0.0);
    } else if (t == largest) {
      raw.push_back(1.0);  // exponent x 0 without inf x 0
    } else {
      raw.push_back(std::exp(exponent * (std::log(t) - log_largest)));
    }
  }
  return raw;
}

std::vector<BlendStage> MixtureStages(const MixtureLayout& layout,
                                      const std::vector<double>& source_tokens) {
  std::vector<BlendStage> out;
  for (size_t i = 0; i < layout.schedule.stages.size(); ++i) {
    const auto& st = layout.schedule.stages[i];
    BlendStage b;
    b.name = st.name;
    b.samples = layout.stage_samples[i];
    b.ramp_samples = layout.ramp_samples[i];
    b.cap_cost = layout.stage_seq_length[i];
    std::vector<double> raw = st.weights;
    if (raw.empty()) raw = SizeWeights(source_tokens, st.size_exponent);
    b.weights = Normalize(raw);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace gridfeed::order
