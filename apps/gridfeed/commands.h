// Subcommands of the `gridfeed` program. Each Register* adds its subcommand to the app and
// returns the function that runs it after parsing (exit code; errors printed by main).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "gridfeed/core/status.h"

namespace gridfeed::app {

using Runner = std::function<Status()>;

Runner RegisterPrep(CLI::App& app);
Runner RegisterInspect(CLI::App& app);
Runner RegisterTables(CLI::App& app);
Runner RegisterSamples(CLI::App& app);
Runner RegisterRun(CLI::App& app);
Runner RegisterAudit(CLI::App& app);
Runner RegisterPlan(CLI::App& app);
Runner RegisterBench(CLI::App& app);

}  // namespace gridfeed::app
