// Verify: a ledger's records recomputed from its own configurations, who read what when, and
// each position (and each source's stream) read exactly once (declared in replay.h).
#include <algorithm>
#include <map>
#include <optional>

#include "gridfeed/audit/ledger_options.h"
#include "gridfeed/audit/replay.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::audit {

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

namespace {

// Who read what when: each file's records, segment by segment, must be what the segment's
// schedule gives its DP rank, in order. Returns the first difference (empty if none).
std::string CheckSchedule(const Ledger& ledger, const Replay& replay) {
  std::vector<std::unique_ptr<order::ReadSchedule>> schedules;
  for (const auto& segment : ledger.segments) {
    auto s = replay.ScheduleFor(segment);
    if (!s.ok()) return "a segment line cannot be planned: " + s.status().message();
    schedules.push_back(std::make_unique<order::ReadSchedule>(std::move(s).value()));
  }
  std::string file;
  int64_t segment_line = -1;
  std::optional<order::ReadSchedule::Walker> walker;
  order::StepBatch batch;
  size_t k = 0;
  for (const auto& e : ledger.entries) {
    const std::string where = e.file + " line " + std::to_string(e.line);
    if (e.segment < 0) return where + ": a record before any segment line";
    if (e.file != file || e.segment_line != segment_line) {  // a run (re)started here
      file = e.file;
      segment_line = e.segment_line;
      const auto& schedule = *schedules[static_cast<size_t>(e.segment)];
      if (e.file_dp_rank >= schedule.options().dp_size) {
        return where + ": a record in the file of DP rank " + std::to_string(e.file_dp_rank) +
               " from a run with DP " + std::to_string(schedule.options().dp_size);
      }
      walker.emplace(schedule.Walk(e.file_dp_rank));
      batch.positions.clear();
      k = 0;
    }
    if (k == batch.positions.size()) {
      if (!walker->Next(&batch)) return where + ": a record after the schedule's end";
      k = 0;
    }
    const auto& got = e.record;
    const int64_t want_position = batch.positions[k++];
    if (got.iteration != batch.iteration || got.micro_batch != batch.micro_batch ||
        got.dp_rank != e.file_dp_rank || got.position != want_position) {
      return where + ": recorded iteration " + std::to_string(got.iteration) + " micro-batch " +
             std::to_string(got.micro_batch) + " dp_rank " + std::to_string(got.dp_rank) +
             " position " + std::to_string(got.position) + ", the read schedule gives iteration " +
             std::to_string(batch.iteration) + " micro-batch " + std::to_string(batch.micro_batch) +
             " dp_rank " + std::to_string(e.file_dp_rank) + " position " +
             std::to_string(want_position);
    }
  }
  return "";
}

}  // namespace

Result<VerifyReport> Verify(const Ledger& ledger, int64_t from) {
  GRIDFEED_ASSIGN_OR_RETURN(const config::JobOptions o, LedgerOptions(ledger));
  VerifyReport report;
  std::vector<Ledger::Schedule> all = ledger.schedules;
  if (all.empty()) all.push_back({0, ledger.fingerprint, ledger.canonical_config});
  for (const auto& sc : all) {
    if (config::FingerprintOf(sc.canonical_config) != sc.fingerprint) {
      report.first_difference =
          "the fingerprint line " + sc.fingerprint +
          (sc.position ? " of the schedule from position " + std::to_string(sc.position) : "") +
          " is not the hash of the configuration line (" +
          config::FingerprintOf(sc.canonical_config) + ")";
      return report;
    }
  }
  if (ledger.entries.empty()) {
    report.first_difference = "the ledger holds no records: nothing is proven";
    return report;
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, Replay::OrdersOf(ledger));
  report.schedules = static_cast<int64_t>(replay->num_orders());
  if (ledger.version >= 2) {
    report.first_difference = CheckSchedule(ledger, *replay);
    if (!report.first_difference.empty()) return report;
    report.schedule_checked = true;
  }
  std::vector<int64_t> positions;
  GRIDFEED_ASSIGN_OR_RETURN(const auto pipeline, order::Pipeline::For(o));
  const bool streamed = pipeline->source_streams();
  // Streams (a mixture's): per source and seq length (a stage's own length is another stream
  // of the source), the samples read. An amendment keeps the past, lengths included: the last
  // schedule's lengths hold for every position.
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> streams;
  order::SeqLengths lengths;
  std::map<int64_t, order::ReadSchedule> segment_schedules;  // fetch-ordered orders, by segment
  if (streamed) {
    GRIDFEED_ASSIGN_OR_RETURN(
        const config::JobOptions last,
        LedgerOptions(ledger, ledger.schedules.empty() ? size_t{0} : ledger.schedules.size() - 1));
    GRIDFEED_ASSIGN_OR_RETURN(lengths, order::SeqLengthsOf(last));
  }
  for (const auto& e : ledger.entries) {
    const auto& got = e.record;
    ++report.records;
    positions.push_back(got.position);
    const std::string where = e.file + " line " + std::to_string(e.line);
    const size_t in_force = replay->OrderAt(got.position);
    if (e.segment >= 0) {
      // The run that read it started under the schedule in force at the position: a resume
      // drops every record from its start on, so a later schedule's positions are its own.
      const int64_t start = ledger.segments[static_cast<size_t>(e.segment)].start_consumed;
      if (replay->OrderAt(start) != in_force) {
        report.first_difference = where + ": position " + std::to_string(got.position) +
                                  " was read by a run that started at " + std::to_string(start) +
                                  " under the schedule from position " +
                                  std::to_string(replay->OrderFrom(replay->OrderAt(start))) +
                                  ", but the schedule from position " +
                                  std::to_string(replay->OrderFrom(in_force)) + " governs it";
        return report;
      }
    }
    for (size_t i = in_force; i < replay->num_orders(); ++i) {
      if (got.position < 0 || got.position >= replay->OrderLength(i)) {
        report.first_difference =
            where + ": position " + std::to_string(got.position) + " outside the split's " +
            std::to_string(replay->OrderLength(i)) + " samples" +
            (i ? " (the schedule from position " + std::to_string(replay->OrderFrom(i)) + ")" : "");
        return report;
      }
      order::SampleRecord want;
      if (replay->fetch_ordered()) {
        // FIM's streams restart with every run: recomputed along the segment's own schedule.
        if (e.segment < 0) {
          report.first_difference = where +
                                    ": a fetch-ordered (FIM) record needs its run's "
                                    "segment line to be recomputed";
          return report;
        }
        auto it = segment_schedules.find(e.segment);
        if (it == segment_schedules.end()) {
          GRIDFEED_ASSIGN_OR_RETURN(
              order::ReadSchedule s,
              replay->ScheduleFor(ledger.segments[static_cast<size_t>(e.segment)]));
          it = segment_schedules.emplace(e.segment, std::move(s)).first;
        }
        const order::ReadSchedule& s = it->second;
        auto walked = replay->WalkedRecord(
            s, got.dp_rank, s.FirstStepOf(got.iteration) + got.micro_batch, got.position);
        if (!walked.ok()) {
          report.first_difference = where + ": " + walked.status().message();
          return report;
        }
        want = *walked;
        want.iteration = got.iteration;
        want.micro_batch = got.micro_batch;
        want.dp_rank = got.dp_rank;
      } else {
        want = replay->RecordUnder(i, got.position, got.iteration, got.micro_batch, got.dp_rank);
      }
      if (want != got) {
        report.first_difference =
            "iteration " + std::to_string(got.iteration) + " micro-batch " +
            std::to_string(got.micro_batch) + " dp_rank " + std::to_string(got.dp_rank) +
            " position " + std::to_string(got.position) + " (" + where +
            "): " + FirstDifferentField(got, want) + "; recorded '" + FormatRecord(got) +
            "', recomputed '" + FormatRecord(want) + "'" +
            (i ? " under the schedule from position " + std::to_string(replay->OrderFrom(i)) +
                     (i > in_force ? " (an amendment must keep the order before it)" : "")
               : "");
        return report;
      }
    }
    if (streamed) {  // the source was checked against the order above
      streams[{got.dataset, lengths.At(got.position)}].push_back(got.dataset_sample);
    }
  }
  if (o.data.dataloader_type == "cyclic") {  // every epoch reads the positions again
    report.exactly_once = false;
    report.ok = true;
    return report;
  }
  // Where the ledger's first run began (--consumed-samples or a checkpoint's cursor; records
  // are tied to their segments' starts only from version 2). The segment lines are not part of
  // the fingerprint, so a start past 0 is proven from only when the caller names it (--from):
  // else a ledger cut at its front, segment lines raised to match, would pass.
  int64_t first = 0;
  if (ledger.version >= 2 && !ledger.segments.empty()) {
    first = ledger.segments.front().start_consumed;
    for (const auto& seg : ledger.segments) first = std::min(first, seg.start_consumed);
  }
  if (first != from) {
    report.first_difference =
        "the ledger begins at position " + std::to_string(first) +
        " (where its first run started), not at " + std::to_string(from) +
        (from == 0 ? ": positions [0, " + std::to_string(first) + ") are not in it; give --from " +
                         std::to_string(first) + " to prove the positions from there"
                   : " (--from)");
    return report;
  }
  std::sort(positions.begin(), positions.end());
  for (size_t i = 0; i < positions.size(); ++i) {
    if (i > 0 && positions[i] == positions[i - 1]) {
      report.first_difference =
          "position " + std::to_string(positions[i]) + " was consumed more than once";
      return report;
    }
    if (positions[i] != first + static_cast<int64_t>(i)) {
      report.first_difference = "position " + std::to_string(first + static_cast<int64_t>(i)) +
                                " was never consumed (the next recorded is " +
                                std::to_string(positions[i]) + ")";
      return report;
    }
  }
  report.consumed = static_cast<int64_t>(positions.size());
  // Each source's stream (its Megatron tables, the same under every schedule as the records
  // above show): samples [0, n) each read once; from the first read where the ledger began
  // past position 0 (the records above were each checked against the order).
  const auto names = replay->view().Sources(order::Split::kTrain);
  for (auto& [key, v] : streams) {
    const auto k = static_cast<size_t>(key.first);
    std::sort(v.begin(), v.end());
    const int64_t base = first > 0 && !v.empty() ? v.front() : 0;
    const std::string name =
        (k < names.size() ? names[k].name : std::to_string(k)) +
        (lengths.uniform() ? "" : "' at seq length '" + std::to_string(key.second));
    for (size_t j = 0; j < v.size(); ++j) {
      if (j > 0 && v[j] == v[j - 1]) {
        report.first_difference = "source '" + name + "': sample " + std::to_string(v[j]) +
                                  " of its stream was read more than once";
        return report;
      }
      if (v[j] != base + static_cast<int64_t>(j)) {
        report.first_difference =
            "source '" + name + "': sample " + std::to_string(base + static_cast<int64_t>(j)) +
            " of its stream was never read (the next recorded is " + std::to_string(v[j]) + ")";
        return report;
      }
    }
    report.streams.push_back(
        {key.first, lengths.uniform() ? 0 : key.second, base, static_cast<int64_t>(v.size())});
  }
  report.ok = true;
  return report;
}

}  // namespace gridfeed::audit
