// Rank-tagged logging to stderr. Level from GRIDFEED_LOG_LEVEL (ERROR, WARN, INFO, DEBUG;
// default INFO). INFO/DEBUG lines are printed by rank 0 only; WARN/ERROR by any rank.
// Thread safety: each line is written with one fwrite, so lines from threads do not interleave.
#pragma once

#include <string_view>

namespace gridfeed::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Set by parallel::Grid::Create (so every user of the feeder gets rank tags); defaults to
// rank 0 of 1.
void SetRank(int rank, int size);
// The rank SetRank (or, before it, the launcher's environment) gave. Async-signal-safe.
int CurrentRank();
bool Enabled(Level level);
void Write(Level level, std::string_view message);

inline void Info(std::string_view m) { Write(Level::kInfo, m); }
inline void Warn(std::string_view m) { Write(Level::kWarn, m); }
inline void Error(std::string_view m) { Write(Level::kError, m); }
inline void Debug(std::string_view m) { Write(Level::kDebug, m); }

}  // namespace gridfeed::log
