#include "mpi_job.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace gridfeed::app {

Status RunMpiJob(const char* command, const std::function<Status()>& body) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  Status st;
  try {
    st = body();
  } catch (const std::exception& e) {
    // Unexpected (libraries' exceptions become Status where they arise): this rank cannot
    // know where its peers wait, so the job ends from here.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "%s: error (rank %d): unexpected: %s\n", command, rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (!st.ok()) {
    // Errors that reach here are agreed: every rank has the same one. Each prints it, then
    // all meet once more so no rank is torn down before it printed.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "%s: error (rank %d): %s\n", command, rank, st.ToString().c_str());
    std::fflush(stderr);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    std::exit(1);
  }
  MPI_Finalize();
  return st;
}

}  // namespace gridfeed::app
