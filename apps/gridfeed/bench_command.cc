// gridfeed bench: what a user wants to know before a run, measured on their own options and
// corpus. World rank 0 builds the tables and writes their image (time, peak RSS, sizes) and
// times one reader's assembly against its memcpy floor (bench_measure.h) while the other ranks
// sleep; then, under mpirun, every rank opens the feeder as `run` does and the start-up until
// every rank is ready is reported per phase (slowest rank), with the node windows it allocated.
// --project-nodes N --project-dp D adds a projection of that start-up onto another grid
// (Project() in bench_report.h: the formulas). Only world rank 0 prints.
//
// Collective discipline: every rank takes the same path; a failure on any rank (options,
// rank 0's build, the feeder's open) is agreed, so every rank returns the same error.
#include <mpi.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "bench_measure.h"
#include "bench_report.h"
#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/memory_usage.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/order/registry.h"
#include "gridfeed/parallel/agree.h"
#include "mpi_job.h"

namespace gridfeed::app {
namespace {

constexpr int64_t kMaxBenchSamples = 100'000'000;

struct BenchArgs {
  int64_t samples = 0;
  bool json = false;
  int64_t project_nodes = 0, project_dp = 0;    // 0: no projection
  double project_scale = 1, project_cores = 0;  // the corpus x scale; cores per node (0: ours)
};

// User + system CPU seconds of this process (all its threads).
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Collective on the world: the feeder's start-up on every rank; the report on world rank 0.
Status MeasureStartup(const config::JobOptions& options, int world_rank, StartupFacts* out) {
  ResetPeakResident();  // the start-up's own peak, not rank 0's measurement before it
  GRIDFEED_RETURN_IF_ERROR(parallel::SleepyBarrier(MPI_COMM_WORLD));  // a common start
  const double cpu_before = CpuSeconds();
  Stopwatch watch;
  // Open agrees on its failures: every rank returns here with the same one.
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<feed::Feeder> f,
                            feed::Feeder::Open(options, MPI_COMM_WORLD));
  const double seconds = watch.Seconds();
  const double cpu = CpuSeconds() - cpu_before;
  // The others wait for rank 0's build inside their broadcast phase: the broadcast is counted
  // from the end of rank 0's build until the slowest rank holds the image.
  const auto& s = f->startup();
  const double mine[3] = {seconds, s.build_seconds + s.broadcast_seconds, s.open_seconds};
  double slowest[3] = {0, 0, 0};
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(
      MPI_Reduce(mine, slowest, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce(max)"));
  const double others = world_rank == 0 ? 0 : cpu;
  double others_sum = 0;
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(
      MPI_Reduce(&others, &others_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
      "MPI_Reduce(sum)"));
  // The window this rank's node allocated (0 off the readers): the largest is the job's peak.
  const uint64_t window = f->table_bytes_on_node();
  uint64_t largest_window = 0;
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(
      MPI_Reduce(&window, &largest_window, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD),
      "MPI_Reduce(window max)"));
  // Read on world rank 0 only.
  out->seconds = slowest[0];
  out->build_seconds = s.build_seconds;
  out->broadcast_seconds = slowest[1] - s.build_seconds;
  out->open_seconds = slowest[2];
  out->cpu_rank0_seconds = cpu;
  out->cpu_others_seconds = others_sum;
  out->nodes = f->num_nodes();
  out->node_window_bytes = largest_window;
  out->producers = s.producers;
  out->max_peak_rss_bytes = s.max_peak_rss_bytes;
  out->image_digest = s.image_digest;
  for (int n : f->readers_per_node()) out->readers += n;  // world rank 0's list
  return Status::Ok();  // ~Feeder here, on every rank (collective)
}

Status Bench(const BenchArgs& a, const config::OptionFlags& flags) {
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  log::SetRank(world_rank, world_size);
  // The options as the feeder resolves them (an OLMo order depends on the DP size).
  auto resolved = flags.Resolve();
  Status valid = resolved.status();
  // A bound keeps a slip of the finger (10^12) from measuring for hours; 10^8 positions are
  // minutes at the slowest rates measured.
  if (valid.ok() && (a.samples < 0 || a.samples > kMaxBenchSamples)) {
    valid = InvalidArgument("--samples must be in [0, " + std::to_string(kMaxBenchSamples) +
                            "] (0: about two seconds' worth), got " + std::to_string(a.samples));
  }
  if (valid.ok() &&
      (a.project_nodes < 0 || a.project_dp < 0 || (a.project_nodes > 0) != (a.project_dp > 0))) {
    valid =
        InvalidArgument("--project-nodes and --project-dp go together, each at least 1; got " +
                        std::to_string(a.project_nodes) + " and " + std::to_string(a.project_dp));
  }
  if (valid.ok() && !(a.project_scale > 0 && a.project_scale <= 1e9 && a.project_cores >= 0 &&
                      a.project_cores <= 1e6)) {
    valid = InvalidArgument(
        "--project-scale must be in (0, 10^9] and --project-cores-per-node in "
        "[0, 10^6], got " +
        std::to_string(a.project_scale) + " and " + std::to_string(a.project_cores));
  }
  if (valid.ok() && a.project_nodes > 0 && world_size < 2) {
    valid = FailedPrecondition(
        "--project-nodes needs a broadcast between nodes measured in this run: run bench under "
        "mpirun on at least 2 nodes (or simulated ones: --testing-ranks-per-node)");
  }
  // A pipeline without an assembly floor is refused, not measured against another order's.
  if (const char* no_bench = order::KindOf(resolved->data).no_bench; valid.ok() && no_bench) {
    valid = InvalidArgument(no_bench);
  }
  if (valid.ok()) {
    auto dp = config::ValidateGrid(*resolved, world_size);
    if (dp.ok()) {
      resolved->grid.data_parallel_size = *dp;
      if (resolved->batch.global_batch_size == 0) {
        resolved->batch.global_batch_size = resolved->batch.micro_batch_size * *dp;
      }
    } else {
      valid = dp.status();
    }
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(MPI_COMM_WORLD, valid, world_rank));
  const config::JobOptions& options = *resolved;

  BenchReport report;
  report.ranks = world_size;
  report.data_parallel_size = options.grid.data_parallel_size;
  Status measured;
  if (world_rank == 0) measured = MeasureBuildAndAssembly(options, a.samples, &report);
  // The others sleep while rank 0 measures, then learn how it went.
  GRIDFEED_RETURN_IF_ERROR(parallel::SleepyBarrier(MPI_COMM_WORLD));
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(
      MPI_COMM_WORLD, measured.WithContext("bench measurement"), world_rank));
  if (world_size > 1) {
    StartupFacts startup;
    GRIDFEED_RETURN_IF_ERROR(MeasureStartup(options, world_rank, &startup));
    report.startup = startup;
  }
  if (a.project_nodes > 0) {
    // On world rank 0, where the start-up was reduced; the outcome is agreed.
    Status projected;
    if (world_rank == 0) {
      auto p = Project(report, a.project_nodes, a.project_dp, a.project_scale, a.project_cores);
      if (p.ok()) {
        report.projection = *p;
      } else {
        projected = p.status();
      }
    }
    GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(MPI_COMM_WORLD, projected, world_rank));
  }
  if (world_rank == 0) {
    const std::string text = a.json ? ReportJson(report) + "\n" : ReportText(report);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
  return Status::Ok();
}

}  // namespace

Runner RegisterBench(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Measure on your options and corpus: table build time and peak memory, image size, "
      "assembly rate vs its memcpy floor, and (under mpirun) start-up per phase");
  auto flags = std::make_shared<config::OptionFlags>(sub, config::Groups::All());
  auto a = std::make_shared<BenchArgs>();
  sub->add_option("--samples", a->samples,
                  "Positions one reader assembles for the rate (0: about two seconds' worth)");
  sub->add_flag("--json", a->json,
                "Print one JSON object (keys in docs/benchmarks.md) instead of a table");
  sub->add_option("--project-nodes", a->project_nodes,
                  "Project the start-up onto this many nodes (with --project-dp; under mpirun on "
                  "2+ nodes): a projection from this run's measured start-up, not a measurement");
  sub->add_option("--project-scale", a->project_scale,
                  "With node windows and a divided build: project a corpus this many times this "
                  "one (documents and samples), built by one producer per node");
  sub->add_option("--project-cores-per-node", a->project_cores,
                  "Cores per projected node (0: this process's build threads); simulated nodes "
                  "on one machine share its cores: cores / nodes");
  sub->add_option("--project-dp", a->project_dp,
                  "The data-parallel size of the projected grid (this run's TP, PP and CP kept)");
  return [a, flags]() -> Status {
    return RunMpiJob("gridfeed bench", [&] { return Bench(*a, *flags); });
  };
}

}  // namespace gridfeed::app
