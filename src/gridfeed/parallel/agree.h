// Agreement and status-first broadcasts: the building blocks that make a failure on any rank
// end the same way on every rank instead of leaving peers in a collective forever.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::parallel {

// Collective on `comm`. Every rank passes its local status; every rank returns the same:
// OK if all were OK, else the failure of the lowest failing rank, prefixed with "rank R: "
// (R its rank in `comm`'s `rank_name` numbering, e.g. the world rank).
Status AgreeOnStatus(MPI_Comm comm, const Status& local, int rank_name);

// Collective on `comm`: broadcasts `status` from `root` (code and message) so every rank
// returns it; non-roots pass anything.
Status BroadcastStatus(MPI_Comm comm, int root, const Status& status);

// Collective on `comm`: broadcasts `bytes` from `root` in chunks below INT_MAX.
// REQUIRES: the same size on every rank.
Status BroadcastBytes(MPI_Comm comm, int root, std::span<std::byte> bytes);

// Collective on `comm`: broadcasts a string from `root`.
Status BroadcastString(MPI_Comm comm, int root, std::string* s);

// Collective on `comm`: a barrier in which waiting ranks sleep (backing off from 20 us to 5 ms
// between tests of a non-blocking barrier) instead of polling: ranks that wait seconds or
// minutes for another's work (world rank 0's table build) leave the cores to it. Costs at
// most a few milliseconds of latency; use it before long waits only.
Status SleepyBarrier(MPI_Comm comm);

// Point to point on `comm`, in chunks below INT_MAX (tag `tag`): `bytes` to rank `dest`.
Status SendBytes(MPI_Comm comm, int dest, int tag, std::span<const std::byte> bytes);
// The matching receive of exactly `bytes.size()` bytes from `source`; while the data has not
// come the rank sleeps between tests, as in SleepyBarrier (the sender may be busy for long).
Status SleepyReceiveBytes(MPI_Comm comm, int source, int tag, std::span<std::byte> bytes);

// Collective on `comm`: every rank sends `send[q]` to rank q (any sizes, in chunks below
// INT_MAX) and receives rank q's bytes for it in `(*received)[q]`, sleeping while it waits.
// The sizes go first; each rank checks that it can hold what it will receive and allocates it,
// and the ranks agree on that (errors named by `rank_name`, e.g. the world rank) before
// anything is posted, so such an error is every rank's. A failed MPI call after that ends the
// job (MPI_Abort, with a message): its peers would wait for it forever.
Status ExchangeBytes(MPI_Comm comm, int rank_name, std::span<const std::span<const std::byte>> send,
                     std::vector<std::vector<std::byte>>* received);

// Collective on `comm`: true on every rank iff every rank passed the same value.
bool AllEqual(MPI_Comm comm, uint64_t value);

// MPI error code -> Status naming the call.
Status MpiStatus(int code, const char* call);

}  // namespace gridfeed::parallel
