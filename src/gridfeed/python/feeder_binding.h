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
// other options raises the same exception as every other rank instead of hanging; an
// intercommunicator is refused on every rank (InvalidArgument, a local check).
// save_checkpoint agrees on its arguments (iteration in [0, 2^40], a path without NUL) before
// world rank 0 creates the folder and writes, so a refused argument writes nothing anywhere.
// Ends (nothing waits in a collective that peers may never reach):
//   - close(), or leaving a `with` block without an exception, destroys the C++ Feeder
//     collectively, so every rank must do it at the same point;
//   - given up locally (feed::Feeder::Abandon: the prefetch thread stops, the communicators
//     and the shared window stay until the job ends): a `with` block left by an exception,
//     close() called while an exception other than StopIteration is handled (an except or
//     finally block: this rank may be alone there), a Feeder dropped without close(), and every
//     open Feeder at MPI_Finalize (a delete callback of an MPI_COMM_SELF attribute, which
//     MPI_Finalize runs first; calls afterwards raise FailedPrecondition);
//   - an uncaught exception on any rank ends the job (job_abort.h: sys.excepthook).
// Interrupts: a SIGINT while next() waits is taken there; the micro-batch is returned (so
// consumed_samples counts only what the caller holds) and KeyboardInterrupt is raised by the
// next call of this Feeder (next, save_checkpoint, close) before it does anything. If next()
// still waits 2 s after the signal (a peer dead or stuck), the job is aborted (job_abort.h).
// A MicroBatch's keys, dtypes and shapes are its pipeline's field schema's
// (order/field_schema.h, feed::MicroBatch::fields). Packed micro-batches (--sft):
// MicroBatch.packed is True, tokens/position_ids/labels/loss_mask are one flattened row
// [1, mbs * local_seq_length] as Megatron's get_batch leaves them, and cu_seqlens (an int32
// view, also mb["cu_seqlens"]) and max_seqlen are set.
// Ownership: each MicroBatch owns its buffers; the arrays it gives are NumPy views whose base
// is the MicroBatch, so they stay valid as long as any view (or a tensor made from one) lives,
// also after close(). The communicators (dp_comm, ...) are mpi4py views of the feeder's
// handles, valid until close().
// Threads: safe. A per-Feeder mutex (waited for only with the GIL released) serialises next(),
// save_checkpoint() and close(): two threads' next() calls each get their own micro-batch (the
// TP peers must make as many calls); close() while another thread is in next() or
// save_checkpoint() raises FailedPrecondition; any call after close() raises it too. The
// properties read facts fixed at construction (and consumed_samples, an atomic). next()
// releases the GIL while it waits for the prefetch thread and the TP broadcast. MPI must be
// initialised with a thread level that allows the calling threads (mpi4py's default,
// MPI_THREAD_MULTIPLE, does).
#pragma once

#include <pybind11/pybind11.h>

namespace gridfeed::python {

void RegisterFeeder(pybind11::module_& m);

}  // namespace gridfeed::python
