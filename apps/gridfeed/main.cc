// The `gridfeed` command: one program, one subcommand per job.
#include <cstdio>
#include <exception>
#include <map>

#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/core/build_config.h"
#include "gridfeed/device/probe.h"

int main(int argc, char** argv) {
  CLI::App app{"gridfeed " GRIDFEED_VERSION ": an MPI-native data feeder for LLM pretraining"};
  app.require_subcommand(1);
  std::map<CLI::App*, gridfeed::app::Runner> runners;
  auto add = [&](gridfeed::app::Runner (*reg)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    auto runner = reg(app);
    runners[app.get_subcommands({})[before]] = std::move(runner);
  };
  add(gridfeed::app::RegisterPrep);
  add(gridfeed::app::RegisterInspect);
  add(gridfeed::app::RegisterTables);
  add(gridfeed::app::RegisterSamples);
  add(gridfeed::app::RegisterRun);
  add(gridfeed::app::RegisterAudit);
  add(gridfeed::app::RegisterPlan);
  add(gridfeed::app::RegisterBench);
  CLI::App* version = app.add_subcommand("version", "Print the version and the device probe");
  if (argc > 1 && argv[1][0] != '-') {  // CLI11 would say "A subcommand is required"
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "gridfeed: unknown subcommand '%s'; one of %s (see --help)\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return gridfeed::config::ExitOnParseError(app, e);  // unknown flags: "did you mean"
  }
  try {
    if (version->parsed()) {
      auto p = gridfeed::device::Probe();
      std::printf("gridfeed %s\ncuda compiled: %s, nccl compiled: %s%s%s\ngpus: %d (%s)\n",
                  GRIDFEED_VERSION, p.compiled_with_cuda ? "yes" : "no",
                  p.compiled_with_nccl ? "yes" : "no", p.nccl_version.empty() ? "" : " ",
                  p.nccl_version.c_str(), p.device_count, p.cuda_status.c_str());
      if (p.device_count > 0) std::printf("kernel round trip: %s\n", p.kernel_ok ? "ok" : "FAILED");
      return 0;
    }
    for (auto& [sub, run] : runners) {
      if (!sub->parsed()) continue;
      gridfeed::Status st = run();
      if (!st.ok()) {
        std::fprintf(stderr, "gridfeed %s: error: %s\n", sub->get_name().c_str(),
                     st.ToString().c_str());
        return 1;
      }
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gridfeed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
