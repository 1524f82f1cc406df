#include "gridfeed/core/log.h"

#include <strings.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gridfeed::log {
namespace {

// Until Grid::Create tells: the launcher's rank, so INFO lines printed before MPI (option
// parsing) appear once per job, not once per rank.
int RankFromLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

std::atomic<int> g_rank{RankFromLauncher()};
std::atomic<int> g_size{1};

// GRIDFEED_LOG_LEVEL in any case; a value it does not know is named once (by the launcher's
// rank 0) rather than silently read as INFO.
Level LevelFromEnv() {
  const char* v = std::getenv("GRIDFEED_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return Level::kInfo;
  if (strcasecmp(v, "ERROR") == 0) return Level::kError;
  if (strcasecmp(v, "WARN") == 0 || strcasecmp(v, "WARNING") == 0) return Level::kWarn;
  if (strcasecmp(v, "INFO") == 0) return Level::kInfo;
  if (strcasecmp(v, "DEBUG") == 0) return Level::kDebug;
  if (g_rank.load() == 0) {
    std::fprintf(stderr,
                 "[gridfeed WARN] GRIDFEED_LOG_LEVEL=%s is not one of ERROR, WARN, INFO, DEBUG "
                 "(any case); logging at INFO\n",
                 v);
  }
  return Level::kInfo;
}

const char* LevelName(Level l) {
  switch (l) {
    case Level::kError:
      return "ERROR";
    case Level::kWarn:
      return "WARN";
    case Level::kInfo:
      return "INFO";
    case Level::kDebug:
      return "DEBUG";
  }
  return "?";
}

}  // namespace

void SetRank(int rank, int size) {
  g_rank = rank;
  g_size = size;
}

int CurrentRank() { return g_rank.load(std::memory_order_relaxed); }

bool Enabled(Level level) {
  static const Level threshold = LevelFromEnv();
  if (level > threshold) return false;
  if (level >= Level::kInfo && g_rank.load() != 0) return false;
  return true;
}

void Write(Level level, std::string_view message) {
  if (!Enabled(level)) return;
  std::string line = "[gridfeed ";
  line += LevelName(level);
  if (g_size.load() > 1) {
    line += " rank " + std::to_string(g_rank.load()) + "/" + std::to_string(g_size.load());
  }
  line += "] ";
  line += message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace gridfeed::log
