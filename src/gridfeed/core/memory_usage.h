// The process's resident memory as Linux reports it in /proc/self/status: for benchmarks and
// `gridfeed bench`, which print peak memory next to the bytes a phase needs.
// Thread safe (reads and writes procfs only).
#pragma once

#include <cstdint>

namespace gridfeed {

// VmHWM (peak resident set since start or the last reset) in bytes; -1 if unreadable.
int64_t PeakResidentBytes();
// VmRSS in bytes; -1 if unreadable.
int64_t ResidentBytes();
// Resets the peak to the current resident set (/proc/self/clear_refs "5"), so the next
// PeakResidentBytes covers one phase. False where the kernel does not allow it.
bool ResetPeakResident();

}  // namespace gridfeed
