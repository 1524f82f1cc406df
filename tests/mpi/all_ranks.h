// Checks that end a collective sequence on every rank together. A gtest ASSERT_* on one rank
// returns from that rank alone and leaves the others waiting in the next collective until the
// test's timeout; here every rank passes its local verdict to one collective, which combines
// them, records a failure naming the failing ranks and their messages, and gives every rank the
// same answer, so that all ranks leave (or carry on) at the same point.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace gridfeed::testing {

// Collective on MPI_COMM_WORLD. `ok` is this rank's verdict, `why` what failed here (ignored
// when ok). Returns true on every rank when every rank passed. Otherwise records a gtest failure
// at file:line on every rank (rank 0's lists every failing rank with its message, a failing
// rank's has its own) and returns false on every rank.
inline bool AllRanksPass(bool ok, const std::string& why, const char* file, int line) {
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mine = ok ? std::string() : why;
  const int mine_len = static_cast<int>(mine.size());
  std::vector<int> lens(size);
  // A length of -1 marks a rank that passed.
  const int flag = ok ? -1 : mine_len;
  MPI_Allgather(&flag, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
  bool all = true;
  for (int l : lens) all = all && l < 0;
  if (all) return true;
  std::vector<int> counts(size), displs(size);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = lens[r] < 0 ? 0 : lens[r];
    displs[r] = total;
    total += counts[r];
  }
  std::string text(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), ok ? 0 : mine_len, MPI_CHAR, text.data(), counts.data(),
                 displs.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::string failing, report;
  for (int r = 0; r < size; ++r) {
    if (lens[r] < 0) continue;
    failing += (failing.empty() ? "" : ", ") + std::to_string(r);
    report += "\n  [rank " + std::to_string(r) + "] " + text.substr(displs[r], counts[r]);
  }
  std::string msg = "failed on rank(s) " + failing + " of " + std::to_string(size);
  if (rank == 0) {
    msg += ":" + report;
  } else if (!ok) {
    msg += "; here: " + mine;
  } else {
    msg += " (rank 0 lists why)";
  }
  ADD_FAILURE_AT(file, line) << msg;
  return false;
}

// Collective: the number of ranks on which `b` holds.
inline int RanksWhere(bool b) {
  int local = b ? 1 : 0, n = 0;
  MPI_Allreduce(&local, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return n;
}

}  // namespace gridfeed::testing

// Collective ASSERT: on a failure on any rank, every rank records it and returns from the
// (void) test function at this point. `why` is evaluated only where `cond` is false.
#define GRIDFEED_ASSERT_ALL_RANKS(cond, why)                                                      \
  do {                                                                                            \
    const bool gridfeed_ok_ = static_cast<bool>(cond);                                            \
    if (!::gridfeed::testing::AllRanksPass(                                                       \
            gridfeed_ok_, gridfeed_ok_ ? std::string() : std::string(why), __FILE__, __LINE__)) { \
      return;                                                                                     \
    }                                                                                             \
  } while (0)
