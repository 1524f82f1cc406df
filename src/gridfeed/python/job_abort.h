// How a Python rank ends an MPI job it cannot finish with its peers, as `gridfeed run` does for
// C++ errors (print, then MPI_Abort): nothing waits in a collective that its peers never reach.
//
// - InstallExceptHook (at import): sys.excepthook becomes gridfeed's, which chains the previous
//   hook. An exception that no code catches, on any rank of a job of more than one process,
//   prints its traceback (one line naming the rank first) and calls MPI_Abort(MPI_COMM_WORLD),
//   so the job ends promptly with a non-zero code instead of waiting in MPI_Finalize or in a
//   peer's collective. Without MPI (or with one process) the previous hook alone runs. To opt
//   out, set sys.excepthook back (sys.__excepthook__).
// - InterruptWatch (around the blocking part of Feeder.next()): SIGINT that arrives while a
//   next() waits (the GIL released, in the TP broadcast or for the prefetch thread) is noted.
//   If next() completes within kInterruptGraceSeconds, it returns its micro-batch (counted by
//   consumed_samples and now held by the caller) and the KeyboardInterrupt is raised by the
//   Feeder's next call instead (see feeder_binding.h); if it is still waiting by then (a TP
//   peer dead or stuck) and SIGINT has Python's default handler, the process prints why and
//   calls MPI_Abort: a collective cannot be left midway, and waiting forever is worse than
//   ending the job. A trainer's own SIGINT handler (a graceful stop) is left to do its work.
// - InstallExitHook (at import): a rank whose script ends (a return, sys.exit(n), SystemExit,
//   exit()) while a Feeder it opened was not closed collectively (still open, given up by an
//   exception or SystemExit, or dropped) would wait in MPI_Finalize while its peers wait for it
//   in the Feeder's collectives. An atexit handler (run before mpi4py's MPI_Finalize) then
//   prints a line naming the rank and the exit code (known when it came from sys.exit) and
//   calls MPI_Abort with that code (1 when it is 0 or unknown). Jobs of one process, MPI
//   finalised or not initialised: nothing happens. Every Feeder closed: a clean end.
// Thread safety: every function may be called from any thread; InstallExceptHook needs the
// GIL, AbortJob and InterruptWatch do not (a watchdog thread, started on first use, aborts).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace gridfeed::python {

inline constexpr double kInterruptGraceSeconds = 2.0;

// Sets sys.excepthook to gridfeed's (module attribute `_excepthook`; the previous hook is kept
// as `_previous_excepthook`). REQUIRES: the GIL.
void InstallExceptHook(pybind11::module_& m);

// Wraps sys.exit (recording the code asked for on the main thread; the previous one is kept
// as `_previous_exit`) and registers the atexit handler above. REQUIRES: the GIL.
void InstallExitHook(pybind11::module_& m);

// Feeders opened and not (yet) closed collectively, for the atexit handler. Any thread.
void NoteFeederOpened();
void NoteFeederClosed();

// Prints "gridfeed: error (rank R of N): <message>" to stderr and ends the job: MPI_Abort when
// MPI is initialised and not finalised, else std::_Exit(1). Async: usable without the GIL.
[[noreturn]] void AbortJob(const std::string& message);

// Whether SIGINT has Python's default handler (signal.default_int_handler, which raises
// KeyboardInterrupt). A trainer that installed its own (a graceful stop) asked to handle the
// signal itself, so a watch then never aborts. REQUIRES: the GIL.
bool SigintIsPythonsDefault();

// RAII: one blocking wait of Feeder.next() (see above); nests across threads and feeders.
// `abort_when_stuck` (SigintIsPythonsDefault() read before the GIL is released): whether a
// SIGINT during a wait that outlasts the grace period ends the job; false only notes it.
class InterruptWatch {
 public:
  InterruptWatch(const char* what, bool abort_when_stuck);
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;
  // Whether SIGINT arrived while this watch was active.
  bool interrupted() const;

 private:
  unsigned long long start_count_;
};

}  // namespace gridfeed::python
