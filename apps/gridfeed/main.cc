// The `gridfeed` command: one program, one subcommand per job.
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <utility>

#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/core/build_config.h"
#include "gridfeed/device/probe.h"

int main(int argc, char** argv) {
  CLI::App app{"gridfeed " GRIDFEED_VERSION ": an MPI-native data feeder for LLM pretraining"};
  app.require_subcommand(1);
  std::map<CLI::App*, gridfeed::app::Runner> runners;
  using Register = gridfeed::app::Runner (*)(CLI::App&);
  const std::pair<const char*, Register> commands[] = {
      {"prep", gridfeed::app::RegisterPrep},     {"inspect", gridfeed::app::RegisterInspect},
      {"tables", gridfeed::app::RegisterTables}, {"samples", gridfeed::app::RegisterSamples},
      {"run", gridfeed::app::RegisterRun},       {"audit", gridfeed::app::RegisterAudit},
      {"plan", gridfeed::app::RegisterPlan},     {"bench", gridfeed::app::RegisterBench}};
  // A named subcommand registers its own options only: all of them take about 500 KB of
  // heap, and every page of it is a fault at start-up on every rank. --help and the like
  // (no subcommand first) see them all.
  const char* named = argc > 1 && argv[1][0] != '-' ? argv[1] : nullptr;
  if (named != nullptr) {  // CLI11 would say "A subcommand is required"
    bool known = std::string(named) == "version";
    std::string names;
    for (const auto& [name, reg] : commands) {
      known = known || std::string(name) == named;
      names += std::string(names.empty() ? "" : ", ") + name;
    }
    if (!known) {
      std::fprintf(stderr, "gridfeed: unknown subcommand '%s'; one of %s, version (see --help)\n",
                   named, names.c_str());
      return 2;
    }
  }
  for (const auto& [name, reg] : commands) {
    if (named != nullptr && std::string(name) != named) continue;
    const size_t before = app.get_subcommands({}).size();
    auto runner = reg(app);
    CLI::App* sub = app.get_subcommands({})[before];
    if (sub->get_name() != name) {  // the table above names each Register's subcommand
      std::fprintf(stderr, "gridfeed: internal error: '%s' registered as '%s'\n", name,
                   sub->get_name().c_str());
      return 70;
    }
    runners[sub] = std::move(runner);
  }
  CLI::App* version = app.add_subcommand("version", "Print the version and the device probe");
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
        // A NUL inside the message (quoted from user data) would cut it short: shown as \0.
        std::string text = st.ToString();
        for (size_t at; (at = text.find('\0')) != std::string::npos;) text.replace(at, 1, "\\0");
        std::fprintf(stderr, "gridfeed %s: error: %s\n", sub->get_name().c_str(), text.c_str());
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
