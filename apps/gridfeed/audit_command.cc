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

#include "commands.h"
#include "gridfeed/audit/replay.h"
#include "gridfeed/config/canonical.h"
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
  GRIDFEED_ASSIGN_OR_RETURN(auto report, audit::Verify(ledger));
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
                 (s.seq_length ? " at " + std::to_string(s.seq_length) + " tokens" : "") + " [0, " +
                 std::to_string(s.samples) + ")";
    }
  }
  std::printf(
      "verify: %lld records match the recomputation from the ledger's own configuration "
      "(fingerprint %s)%s%s; global positions [0, %lld) consumed exactly once%s\n",
      static_cast<long long>(report.records), ledger.fingerprint.c_str(), schedules.c_str(), when,
      static_cast<long long>(report.consumed), streams.c_str());
  return Status::Ok();
}

// Text for an SVG element: the markup characters escaped.
std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Mixture ledgers: per source and stage, the share achieved over the trailing window of
// iterations (solid) against the target share over the same positions (dashed), stage
// boundaries dashed gray. Each line's values are in its data-values attribute too
// ("iteration:share ...") for tools and tests.
std::string ShareSvg(const audit::Accounting& acc) {
  const double left = 60, right = 700, top = 50, bottom = 340;
  int64_t lo = -1, hi = 0;
  for (const auto& st : acc.stages) {
    for (int64_t it : st.iterations) {
      lo = lo < 0 ? it : std::min(lo, it);
      hi = std::max(hi, it);
    }
  }
  lo = std::max<int64_t>(lo, 0);
  const double span = static_cast<double>(std::max<int64_t>(1, hi - lo));
  auto x = [&](int64_t it) { return left + (right - left) * static_cast<double>(it - lo) / span; };
  auto y = [&](double v) { return bottom - (bottom - top) * std::clamp(v, 0.0, 1.0); };
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof(b), "%.2f", v);
    return std::string(b);
  };
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::string svg =
      "<svg xmlns='http://www.w3.org/2000/svg' width='760' height='400'>\n"
      "<rect width='760' height='400' fill='white'/>\n"
      "<text x='60' y='20' font-size='14'>share per source: achieved over the trailing " +
      std::to_string(acc.window) +
      " iterations of each stage (solid) vs target (dashed)</text>\n"
      "<line x1='60' y1='340' x2='700' y2='340' stroke='black'/>"
      "<line x1='60' y1='340' x2='60' y2='50' stroke='black'/>\n"
      "<text x='35' y='344' font-size='11'>0</text><text x='35' y='54' font-size='11'>1</text>"
      "<text x='25' y='199' font-size='11'>0.5</text>\n"
      "<text x='55' y='360' font-size='11'>iteration " +
      std::to_string(lo) + "</text><text x='620' y='360' font-size='11'>iteration " +
      std::to_string(hi) + "</text>\n";
  for (size_t i = 1; i < acc.stages.size(); ++i) {
    const auto& st = acc.stages[i];
    if (st.first_iteration < 0) continue;
    const std::string bx = num(x(st.first_iteration));
    svg += "<line class='stage-boundary' x1='" + bx + "' y1='340' x2='" + bx +
           "' y2='50' stroke='gray' stroke-dasharray='4,3'/><text x='" + bx +
           "' y='45' font-size='10' fill='gray'>" + XmlEscape(st.name) + " (iteration " +
           std::to_string(st.first_iteration) + ")</text>\n";
  }
  for (const auto& st : acc.stages) {
    for (size_t k = 0; k < st.sources.size(); ++k) {
      const auto& c = st.sources[k];
      const std::string color = colors[k % 6];
      for (const bool target : {false, true}) {
        const auto& values = target ? c.target_series : c.share_series;
        std::string pts, data;
        for (size_t j = 0; j < values.size() && j < st.iterations.size(); ++j) {
          char v[40];
          std::snprintf(v, sizeof(v), "%.17g", values[j]);
          pts += num(x(st.iterations[j])) + "," + num(y(values[j])) + " ";
          data += std::to_string(st.iterations[j]) + ":" + v + " ";
        }
        if (pts.empty()) continue;
        svg += std::string("<polyline class='") + (target ? "target" : "achieved") +
               "' data-source='" + XmlEscape(acc.sources[k].prefix) + "' data-stage='" +
               XmlEscape(st.name) + "' data-values='" + data + "' fill='none' stroke='" + color +
               (target ? "' stroke-width='1.5' stroke-dasharray='6,3'" : "' stroke-width='2'") +
               " points='" + pts + "'/>\n";
      }
    }
  }
  for (size_t k = 0; k < acc.sources.size(); ++k) {
    svg += "<text x='710' y='" + std::to_string(60 + 15 * k) + "' font-size='11' fill='" +
           colors[k % 6] + "'>" + XmlEscape(acc.sources[k].prefix) + "</text>\n";
  }
  return svg + "</svg>\n";
}

std::string Svg(const audit::Accounting& acc) {
  const double w = 640, h = 360, pad = 50;
  int64_t max_tokens = 1, max_iter = 1;
  for (const auto& s : acc.series) {
    for (int64_t v : s) max_tokens = std::max(max_tokens, v);
  }
  if (!acc.iterations.empty()) max_iter = std::max<int64_t>(1, acc.iterations.back());
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::string svg =
      "<svg xmlns='http://www.w3.org/2000/svg' width='640' height='360'>\n"
      "<rect width='640' height='360' fill='white'/>\n"
      "<text x='50' y='25' font-size='14'>consumed tokens per source</text>\n";
  svg +=
      "<line x1='50' y1='310' x2='610' y2='310' stroke='black'/>"
      "<line x1='50' y1='310' x2='50' y2='40' stroke='black'/>\n";
  svg += "<text x='560' y='330' font-size='11'>iteration " + std::to_string(max_iter) +
         "</text><text x='5' y='45' font-size='11'>" + std::to_string(max_tokens) + "</text>\n";
  // Stage boundaries: a dashed line at the first iteration that read each later stage.
  for (size_t i = 1; i < acc.stages.size(); ++i) {
    const auto& st = acc.stages[i];
    if (st.first_iteration < 0) continue;
    const std::string x = std::to_string(
        pad + (w - 2 * pad + 10) * static_cast<double>(st.first_iteration) / max_iter);
    svg += "<line class='stage-boundary' x1='" + x + "' y1='310' x2='" + x +
           "' y2='40' stroke='gray' stroke-dasharray='4,3'/><text x='" + x +
           "' y='37' font-size='10' fill='gray'>" + XmlEscape(st.name) + " (iteration " +
           std::to_string(st.first_iteration) + ")</text>\n";
  }
  for (size_t k = 0; k < acc.series.size(); ++k) {
    std::string pts;
    for (size_t i = 0; i < acc.series[k].size(); ++i) {
      const double x = pad + (w - 2 * pad + 10) * static_cast<double>(acc.iterations[i]) / max_iter;
      const double y = h - pad -
                       (h - 2 * pad - 20) * static_cast<double>(acc.series[k][i]) /
                           static_cast<double>(max_tokens);
      pts += std::to_string(x) + "," + std::to_string(y) + " ";
    }
    svg += "<polyline fill='none' stroke-width='2' stroke='" + std::string(colors[k % 6]) +
           "' points='" + pts + "'/>\n<text x='60' y='" + std::to_string(60 + 15 * k) +
           "' font-size='11' fill='" + colors[k % 6] + "'>" + XmlEscape(acc.sources[k].prefix) +
           "</text>\n";
  }
  return svg + "</svg>\n";
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
    GRIDFEED_RETURN_IF_ERROR(
        io::WriteStringToFile(a.plot, acc.stages.empty() ? Svg(acc) : ShareSvg(acc)));
    if (!a.json) std::printf("plot: %s\n", a.plot.c_str());
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
