// gridfeed audit: offline answers to "what did step N read?" (no MPI, no GPU).
//   replay      recompute the records of steps A:B from a config (or a ledger's config)
//   verify      recompute a ledger from its own config, prove exactly-once consumption
//   accounting  per-source samples, tokens, shares and epochs, per stage of a mixture schedule
//               too with the largest share deviation in any --window of iterations (text,
//               --json, --plot SVG)
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "accounting_svg.h"
#include "commands.h"
#include "gridfeed/audit/replay.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/config/data_args.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/core/parse.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"

namespace gridfeed::app {
namespace {

struct AuditArgs {
  std::string ledger;
  std::string steps = "0:1";
  std::string out;
  int64_t until = -1;
  int64_t window = 100;
  int64_t from = 0;
  bool json = false;
  std::string plot;
};

// "A:B" (B exclusive) or "N"; non-negative, A < B.
Result<std::pair<int64_t, int64_t>> ParseSteps(const std::string& s) {
  auto num = [](std::string_view t, int64_t* v) {
    const auto n = ParseInt64(t);
    if (n) *v = *n;
    return n && *n >= 0;
  };
  const auto colon = s.find(':');
  int64_t a = 0, b = 0;
  const bool ok = colon == std::string::npos ? num(s, &a) && (b = a + 1, true)
                                             : num(std::string_view(s).substr(0, colon), &a) &&
                                                   num(std::string_view(s).substr(colon + 1), &b);
  if (!ok || b <= a) {
    return InvalidArgument("--steps must be A:B with 0 <= A < B, or N; got '" + s + "'");
  }
  return std::pair<int64_t, int64_t>(a, b);
}

// The replay a command line asks for: a ledger's own schedules (its segments), or the data
// options and batch geometry given as flags (which override the ledger's geometry; an amended
// ledger's positions are still read under the configuration in force at each).
// `until_iteration`: the replay reaches that far (orders built per epoch need to know).
Result<std::unique_ptr<audit::Replay>> MakeReplay(const AuditArgs& a,
                                                  const config::OptionFlags& flags,
                                                  int64_t until_iteration) {
  GRIDFEED_ASSIGN_OR_RETURN(config::JobOptions o, flags.ResolveUnchecked());
  o.run.train_iters = std::max(o.run.train_iters, until_iteration);
  if (!a.ledger.empty()) {
    GRIDFEED_ASSIGN_OR_RETURN(auto ledger, audit::ReadLedger(a.ledger));
    if (o.grid.data_parallel_size == 0) return audit::Replay::ForLedger(ledger);
    GRIDFEED_ASSIGN_OR_RETURN(o.data, config::FromCanonical(ledger.canonical_config));
    GRIDFEED_RETURN_IF_ERROR(config::Validate(o));
    return audit::Replay::OrdersOf(ledger, &o);
  }
  GRIDFEED_RETURN_IF_ERROR(config::LoadDataArgFiles(&o));
  config::DeriveOptions(&o);
  GRIDFEED_RETURN_IF_ERROR(config::Validate(o));
  if (o.grid.data_parallel_size < 1) {
    return InvalidArgument("--data-parallel-size must be given (the run's DP size)");
  }
  return audit::Replay::Create(o);
}

Status RunReplay(const AuditArgs& a, const config::OptionFlags& flags) {
  GRIDFEED_ASSIGN_OR_RETURN(auto steps, ParseSteps(a.steps));
  GRIDFEED_ASSIGN_OR_RETURN(auto replay, MakeReplay(a, flags, steps.second));
  const int64_t dp = replay->max_dp_size();
  // Checked before any work: a cyclic order never ends, and a typo must not run for days.
  constexpr int64_t kMaxSteps = 100'000'000;
  const int64_t steps_per_rank = replay->StepsIn(steps.first, steps.second);
  if (steps_per_rank > kMaxSteps / dp) {
    return InvalidArgument("--steps " + a.steps + " covers " + std::to_string(steps_per_rank) +
                           " micro-batches per DP rank; replay at most " +
                           std::to_string(kMaxSteps) + " micro-batches at once");
  }
  if (a.out.empty()) std::printf("%s\n", audit::kLedgerColumns);
  Stopwatch progress;  // long replays say how far they are
  int64_t done = 0;
  for (int64_t r = 0; r < dp; ++r) {
    const auto batches = replay->Batches(steps.first, steps.second, r);
    std::string tsv = std::string(audit::kLedgerColumns) + "\n";
    std::vector<int64_t> flat;
    bool uniform = true;  // every micro-batch of the same size: a [micro-batches, mbs] array
    for (const auto& b : batches) {
      uniform = uniform && b.positions.size() == batches.front().positions.size();
      for (int64_t p : b.positions) {
        if (++done % 4096 == 0 && progress.Seconds() > 5) {
          std::fprintf(stderr, "replay: DP rank %lld of %lld, %lld records so far\n",
                       static_cast<long long>(r), static_cast<long long>(dp),
                       static_cast<long long>(done));
          progress.Lap();
        }
        flat.push_back(replay->view().SampleIndex(order::Split::kTrain, p));
        const std::string line =
            audit::FormatRecord(replay->Record(p, b.iteration, b.micro_batch, r));
        if (a.out.empty()) std::printf("%s\n", line.c_str());
        tsv += line + "\n";
      }
    }
    if (!a.out.empty()) {
      const std::string dir = a.out + "/dp_rank" + std::to_string(r);
      GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(dir));
      const auto rows = static_cast<int64_t>(batches.size());
      const std::vector<int64_t> shape =
          uniform ? std::vector<int64_t>{rows, rows ? static_cast<int64_t>(flat.size()) / rows : 0}
                  : std::vector<int64_t>{static_cast<int64_t>(flat.size())};
      GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(dir + "/sample_indices.npy", flat, shape));
      GRIDFEED_RETURN_IF_ERROR(io::WriteStringToFile(dir + "/records.tsv", tsv));
    }
  }
  if (!a.out.empty()) std::printf("replay: wrote %s/dp_rank<r>/\n", a.out.c_str());
  return Status::Ok();
}

// The mixture's source names (the schedule's keys), in source order; empty without one.
std::vector<std::string> SourceNames(const audit::Ledger& ledger) {
  std::vector<std::string> names;
  auto o = config::FromCanonical(ledger.schedules.back().canonical_config);
  if (!o.ok() || o->mixture_schedule.empty()) return names;
  auto s = config::ParseMixtureSchedule(o->mixture_schedule);
  if (!s.ok()) return names;
  for (const auto& src : s->sources) names.push_back(src.name);
  return names;
}

Status RunVerify(const AuditArgs& a) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ledger, audit::ReadLedger(a.ledger));
  GRIDFEED_ASSIGN_OR_RETURN(auto report, audit::Verify(ledger, a.from));
  if (!report.ok) {
    return DataLoss("ledger '" + a.ledger + "' does not match its configuration after " +
                    std::to_string(report.records) + " records: " + report.first_difference);
  }
  const char* when = report.schedule_checked
                         ? "; every record's iteration, micro-batch and DP rank follow the read "
                           "schedule of its run"
                         : " (a version-1 ledger: who read when is not recorded)";
  if (!report.exactly_once) {
    std::printf(
        "verify: %lld records match the recomputation from the ledger's own configuration "
        "(fingerprint %s)%s; cyclic order: positions repeat every epoch, exactly-once does not "
        "apply\n",
        static_cast<long long>(report.records), ledger.fingerprint.c_str(), when);
    return Status::Ok();
  }
  std::string schedules;
  if (report.schedules > 1) {
    schedules = " under " + std::to_string(report.schedules) +
                " mixture schedules (each record under the one in force at its position and "
                "every later one:";
    for (const auto& s : ledger.schedules) {
      schedules += " " + s.fingerprint + " from " + std::to_string(s.position);
    }
    schedules += ")";
  }
  std::string streams;
  if (!report.streams.empty()) {
    streams = "; each source's stream read exactly once:";
    const auto names = ledger.schedules.size() ? SourceNames(ledger) : std::vector<std::string>();
    for (const auto& s : report.streams) {
      const auto k = static_cast<size_t>(s.source);
      streams += " " + (k < names.size() ? names[k] : std::to_string(k)) +
                 (s.seq_length ? " at " + std::to_string(s.seq_length) + " tokens" : "") + " [" +
                 std::to_string(s.first) + ", " + std::to_string(s.first + s.samples) + ")";
    }
  }
  std::printf(
      "verify: %lld records match the recomputation from the ledger's own configuration "
      "(fingerprint %s)%s%s; global positions [%lld, %lld) consumed exactly once%s\n",
      static_cast<long long>(report.records), ledger.fingerprint.c_str(), schedules.c_str(), when,
      static_cast<long long>(a.from), static_cast<long long>(a.from + report.consumed),
      streams.c_str());
  return Status::Ok();
}

Status RunAccounting(const AuditArgs& a) {
  GRIDFEED_ASSIGN_OR_RETURN(auto ledger, audit::ReadLedger(a.ledger));
  GRIDFEED_ASSIGN_OR_RETURN(auto acc, audit::Account(ledger, a.until, a.window));
  if (a.json) {
    nlohmann::json j = nlohmann::json::array();
    for (size_t k = 0; k < acc.sources.size(); ++k) {
      const auto& s = acc.sources[k];
      j.push_back({{"source", s.prefix},
                   {"target_weight", s.weight},
                   {"target", s.target},
                   {"samples", s.samples},
                   {"tokens", s.tokens},
                   {"share", s.share},
                   {"epochs", s.epochs}});
      if (acc.stages.empty()) continue;
      nlohmann::json stages = nlohmann::json::array();
      for (const auto& st : acc.stages) {
        const auto& c = st.sources[k];
        stages.push_back({{"stage", st.name},
                          {"begin", st.begin},
                          {"end", st.end},
                          {"reached", st.reached},
                          {"first_iteration", st.first_iteration},
                          {"target", c.target},
                          {"samples", c.samples},
                          {"tokens", c.tokens},
                          {"share", c.share},
                          {"epochs", c.epochs},
                          {"window", acc.window},
                          {"max_window_deviation",
                           {{"deviation", c.window.deviation},
                            {"share", c.window.share},
                            {"target", c.window.target},
                            {"first_iteration", c.window.first_iteration},
                            {"last_iteration", c.window.last_iteration}}}});
      }
      j.back()["stages"] = std::move(stages);
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    // The target over what was counted (up to --until-step), next to the share there.
    std::printf("%-40s %10s %10s %12s %10s %10s\n", "source", "target", "share", "tokens",
                "samples", "epochs");
    for (const auto& s : acc.sources) {
      std::printf("%-40s %10.4f %10.4f %12lld %10lld %10.4f\n", s.prefix.c_str(), s.target, s.share,
                  static_cast<long long>(s.tokens), static_cast<long long>(s.samples), s.epochs);
    }
    if (!acc.stages.empty() && a.until >= 0) {
      std::printf("(target: the schedule's share over the positions read before iteration %lld)\n",
                  static_cast<long long>(a.until));
    }
    for (const auto& st : acc.stages) {
      std::printf("\nstage '%s': positions [%lld, %lld), ", st.name.c_str(),
                  static_cast<long long>(st.begin), static_cast<long long>(st.end));
      if (st.first_iteration < 0) {
        std::printf("not reached (targets over the whole stage)\n");
      } else {
        std::printf("read [%lld, %lld) from iteration %lld\n", static_cast<long long>(st.begin),
                    static_cast<long long>(st.reached), static_cast<long long>(st.first_iteration));
      }
      const std::string dev = "max dev/" + std::to_string(acc.window);
      std::printf("  %-30s %8s %8s %12s %8s %8s %11s %s\n", "source", "target", "share", "tokens",
                  "samples", "epochs", dev.c_str(), "(window: iterations, share vs target)");
      for (size_t k = 0; k < acc.sources.size(); ++k) {
        const auto& c = st.sources[k];
        std::printf("  %-30s %8.4f %8.4f %12lld %8lld %8.4f", acc.sources[k].prefix.c_str(),
                    c.target, c.share, static_cast<long long>(c.tokens),
                    static_cast<long long>(c.samples), c.epochs);
        if (c.window.first_iteration < 0) {
          std::printf(" %11s\n", "-");
        } else {
          std::printf(" %11.4f (%lld-%lld: %.4f vs %.4f)\n", c.window.deviation,
                      static_cast<long long>(c.window.first_iteration),
                      static_cast<long long>(c.window.last_iteration), c.window.share,
                      c.window.target);
        }
      }
    }
  }
  if (!a.plot.empty()) {
    if (acc.stages.empty() && !TokensPlotIsInformative(acc)) {
      // One source's tokens are the run's tokens: a plot of them says nothing.
      std::fprintf(a.json ? stderr : stdout,
                   "plot: not written: the ledger reads one source (its tokens are the run's "
                   "tokens, in the table above)\n");
    } else {
      GRIDFEED_RETURN_IF_ERROR(
          io::WriteStringToFile(a.plot, acc.stages.empty() ? TokensSvg(acc) : SharesSvg(acc)));
      if (!a.json) std::printf("plot: %s\n", a.plot.c_str());
    }
  }
  return Status::Ok();
}

}  // namespace

Runner RegisterAudit(CLI::App& app) {
  CLI::App* audit = app.add_subcommand("audit", "Reproduce and check the data order offline");
  audit->require_subcommand(1);
  auto a = std::make_shared<AuditArgs>();
  CLI::App* replay = audit->add_subcommand("replay", "Recompute the records of steps A:B");
  // The same flag names as `run` (the data options, --data-parallel-size and the batch sizes).
  auto flags = std::make_shared<config::OptionFlags>(
      replay, config::Groups{config::Group::kData, config::Group::kGrid, config::Group::kBatch});
  replay->add_option("--ledger", a->ledger, "Take the data options from this ledger");
  replay->add_option("--steps", a->steps, "Iterations A:B (B exclusive)")->capture_default_str();
  replay->add_option("--out", a->out, "Write DIR/dp_rank<r>/{sample_indices.npy,records.tsv}");
  CLI::App* verify = audit->add_subcommand("verify", "Check a ledger against its configuration");
  verify->add_option("--ledger", a->ledger)->required();
  verify
      ->add_option("--from", a->from,
                   "The position the proof starts at: where the ledger's first run began "
                   "(its --consumed-samples, or the cursor a new ledger resumed at)")
      ->check(CLI::NonNegativeNumber);
  CLI::App* accounting = audit->add_subcommand("accounting", "Per-source consumption");
  accounting->add_option("--ledger", a->ledger)->required();
  accounting->add_option("--until-step", a->until, "Count iterations before this one");
  accounting->add_flag("--json", a->json);
  accounting
      ->add_option("--window", a->window,
                   "Iterations per window for the largest share deviation in any window of a "
                   "stage (and the plot's trailing shares)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  accounting->add_option("--plot", a->plot,
                         "SVG: with a mixture schedule, achieved vs target share per source over "
                         "iterations with the stage boundaries; else consumed tokens per source");
  return [=]() -> Status {
    if (replay->parsed()) return RunReplay(*a, *flags);
    if (verify->parsed()) return RunVerify(*a);
    return RunAccounting(*a);
  };
}

}  // namespace gridfeed::app
