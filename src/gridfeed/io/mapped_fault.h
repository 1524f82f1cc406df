// What a fault on a mapped store does (issue 51 item 8). A read of a memory map raises SIGBUS
// where the file no longer holds the page (truncated while mapped) or cannot be read (an I/O
// error); without a handler every rank dies silently. MMapFile registers each mapping here, and
// the first registration installs a SIGBUS handler that maps the faulting address to its store
// and ends the process with
//   gridfeed: error (rank R): 'PATH' changed under the job (truncated while mapped: a read at
//   offset N faulted; it is now S bytes, L when mapped)
// (or what else the file's state tells), written with async-signal-safe calls only. It then
// removes the temporaries of outputs being written (file_util.h), calls the job's end (below:
// MPI_Abort, so every rank ends, not only those that read the file) and exits with status 1.
// A SIGBUS outside every registered mapping (or sent by kill) keeps its previous course.
//
// Thread safety: every function may be called from any thread; the registry is lock-free, so
// the handler reads it while mappings come and go.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace gridfeed::io {

struct MappedSlot;

// Registers [base, base + size) as the mapping of `path` (the file `dev`/`ino`, `size` bytes
// when mapped) and installs the handler if it is not the current one. Returns the slot to
// unregister, or nullptr when the path is too long to keep (its faults are then not named).
MappedSlot* RegisterMapping(const void* base, size_t size, const std::string& path, dev_t dev,
                            ino_t ino);
// Before the mapping goes. nullptr is ignored.
void UnregisterMapping(MappedSlot* slot);

// What ends the job after the message (e.g. MPI_Abort on MPI_COMM_WORLD: a rank that only exits
// may leave its peers waiting under a launcher that does not end the job for it). Called from
// the signal handler; if it returns, or has not ended the process within 30 s (SIGALRM's
// default action is armed first), the process ends anyway. nullptr: exit only. Also installs
// the handler again if another one replaced it (an MPI library's, at MPI_Init), chaining to it.
void SetMappedFaultEnd(void (*end_job)());

// The same end, outside a signal handler, for a store found changed under the job some other
// way (a store opened at its first read that can no longer be opened): writes
//   gridfeed: error (rank R): WHAT; the job ends
// removes the live temporaries, calls the job's end and exits with status 1.
[[noreturn]] void EndJobOnChangedStore(const std::string& what);

}  // namespace gridfeed::io
