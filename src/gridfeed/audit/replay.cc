#include "gridfeed/audit/replay.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "gridfeed/feed/data_build.h"

namespace gridfeed::audit {

Result<config::DataOptions> DataOptionsFromCanonical(const std::string& canonical) {
  auto j = nlohmann::json::parse(canonical, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLoss("the configuration text is not a JSON object");
  }
  config::DataOptions o;
  try {
    o.data_path = j.at("data-path").get<std::vector<std::string>>();
    o.train_data_path = j.at("train-data-path").get<std::vector<std::string>>();
    o.valid_data_path = j.at("valid-data-path").get<std::vector<std::string>>();
    o.test_data_path = j.at("test-data-path").get<std::vector<std::string>>();
    o.split = j.at("split").get<std::string>();
    o.seq_length = j.at("seq-length").get<int64_t>();
    o.seed = j.at("seed").get<int64_t>();
    o.train_samples = j.at("train-samples").get<std::string>();
    o.valid_samples = j.at("valid-samples").get<std::string>();
    o.test_samples = j.at("test-samples").get<std::string>();
    o.vocab_size = j.at("vocab-size").get<int64_t>();
    o.eod_id = j.at("eod-id").get<int64_t>();
    o.pad_id = j.at("pad-id").get<int64_t>();
    o.reset_position_ids = j.at("reset-position-ids").get<bool>();
    o.reset_attention_mask = j.at("reset-attention-mask").get<bool>();
    o.eod_mask_loss = j.at("eod-mask-loss").get<bool>();
    o.create_attention_mask = j.at("create-attention-mask").get<bool>();
    o.no_add_extra_token = j.at("no-add-extra-token").get<bool>();
    o.no_drop_last_partial_validation_sequence =
        j.at("no-drop-last-partial-validation-sequence").get<bool>();
    o.mid_level_dataset_surplus = j.at("mid-level-dataset-surplus").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("the configuration text lacks a field: ") + e.what());
  }
  return o;
}

Result<std::unique_ptr<Replay>> Replay::Create(const config::DataOptions& options) {
  std::unique_ptr<Replay> r(new Replay());
  r->options_ = options;
  GRIDFEED_ASSIGN_OR_RETURN(r->built_, feed::BuildFromOptions(options));
  if (!r->built_.splits[0]) return FailedPrecondition("the train split is empty");
  r->sample_options_ = feed::ToSampleOptions(options, r->built_.pad_id_used);
  return r;
}

order::SampleRecord Replay::Record(int64_t position, int64_t iteration, int64_t micro_batch,
                                   int64_t dp_rank) const {
  const auto& sd = train();
  const auto [k, j] = sd.Locate(position);
  const auto& m = sd.mids[k];
  order::Sample sample;
  order::AssembleSample(*m.dataset, m.tables.View(), j, sample_options_, &sample);
  auto r = order::MakeSampleRecord(position, k, j, m.tables.View(), sample.tokens);
  r.iteration = iteration;
  r.micro_batch = micro_batch;
  r.dp_rank = dp_rank;
  return r;
}

std::vector<std::vector<int64_t>> Replay::Positions(int64_t first, int64_t last, int64_t dp_rank,
                                                    int64_t dp, int64_t mbs, int64_t gbs) const {
  std::vector<std::vector<int64_t>> out;
  const int64_t per_iter = gbs / (mbs * dp);
  for (int64_t it = first; it < last; ++it) {
    for (int64_t m = 0; m < per_iter; ++m) {
      std::vector<int64_t> row;
      const int64_t base = it * gbs + m * mbs * dp + dp_rank * mbs;
      for (int64_t k = 0; k < mbs; ++k) {
        if (base + k < train().length) row.push_back(base + k);
      }
      if (static_cast<int64_t>(row.size()) == mbs) out.push_back(row);
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

Result<VerifyReport> Verify(const Ledger& ledger) {
  GRIDFEED_ASSIGN_OR_RETURN(config::DataOptions o,
                            DataOptionsFromCanonical(ledger.canonical_config));
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::Create(o));
  VerifyReport report;
  std::vector<int64_t> positions;
  for (const auto& e : ledger.entries) {
    const auto& got = e.record;
    ++report.records;
    positions.push_back(got.position);
    if (got.position < 0 || got.position >= replay->train().length) {
      report.first_difference = e.file + " line " + std::to_string(e.line) + ": position " +
                                std::to_string(got.position) + " outside the split's " +
                                std::to_string(replay->train().length) + " samples";
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
  GRIDFEED_ASSIGN_OR_RETURN(config::DataOptions o,
                            DataOptionsFromCanonical(ledger.canonical_config));
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::Create(o));
  const auto& sd = replay->train();
  Accounting a;
  const size_t n = sd.mids.size();
  a.sources.resize(n);
  for (size_t k = 0; k < n; ++k) {
    a.sources[k].prefix = sd.mids[k].prefix;
    a.sources[k].weight = sd.blended ? sd.weights[k] : 1.0;
  }
  std::map<int64_t, std::vector<int64_t>> per_iteration;  // iteration -> samples per source
  for (const auto& e : ledger.entries) {
    if (until >= 0 && e.record.iteration >= until) continue;
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
    const int64_t per_epoch = sd.mids[k].tables.num_samples_per_epoch;
    s.epochs = per_epoch ? static_cast<double>(s.samples) / static_cast<double>(per_epoch) : 0;
  }
  return a;
}

}  // namespace gridfeed::audit
