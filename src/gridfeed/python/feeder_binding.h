// gridfeed.Feeder and gridfeed.MicroBatch: the C++ feed::Feeder for a Python training loop.
//
//   feeder = gridfeed.Feeder(comm=MPI.COMM_WORLD, config="job.yaml", micro_batch_size=4, ...)
//   mb = feeder.next()                  # a MicroBatch: mb["tokens"], mb["labels"], ...
//   feeder.save_checkpoint(path, iteration=step)
//   feeder.close()                      # or: with gridfeed.Feeder(...) as feeder:
//
// Collectivity (as feed/feeder.h): the constructor, save_checkpoint and close are collective on
// `comm`; next() is collective on the rank's TP group. The constructor first agrees on the
// keyword errors of every rank, then Feeder::Open agrees on every option, so a rank given
// other options raises the same exception as every other rank instead of hanging.
// Destruction: close() (or leaving a `with` block without an exception) destroys the C++
// Feeder collectively, so every rank must call it at the same point. A Feeder that is dropped
// without close(), or left by an exception, is not destroyed (a rank unwinding alone must not
// wait in a collective): its communicators and shared window stay until MPI_Finalize.
// Ownership: each MicroBatch owns its buffers; the arrays it gives are NumPy views whose base
// is the MicroBatch, so they stay valid as long as any view (or a tensor made from one) lives,
// also after close(). The communicators (dp_comm, ...) are mpi4py views of the feeder's
// handles, valid until close().
// Threads: next() releases the GIL while it waits for the prefetch thread and the TP
// broadcast; call a Feeder's methods from one thread (the one that uses MPI).
#pragma once

#include <pybind11/pybind11.h>

namespace gridfeed::python {

void RegisterFeeder(pybind11::module_& m);

}  // namespace gridfeed::python
