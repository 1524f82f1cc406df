// The process's resident memory as Linux reports it in /proc/self/status: for benchmarks and
// `gridfeed bench`, which print peak memory next to the bytes a phase needs. And the memory it
// can still get, so a build too large for the machine is an error naming what to change, not
// a bad_alloc or the OOM killer. Thread safe (reads procfs and cgroupfs; ResetPeakResident writes
// procfs).
#pragma once

#include <cstdint>
#include <string>

#include "gridfeed/core/status.h"

namespace gridfeed {

// VmHWM (peak resident set since start or the last reset) in bytes; -1 if unreadable.
int64_t PeakResidentBytes();
// VmRSS in bytes; -1 if unreadable.
int64_t ResidentBytes();
// Resets the peak to the current resident set (/proc/self/clear_refs "5"), so the next
// PeakResidentBytes covers one phase. False where the kernel does not allow it.
bool ResetPeakResident();

// Bytes the process could still allocate: MemAvailable + SwapFree (/proc/meminfo), capped by
// the least room its memory cgroups leave, its own and its ancestors' (limit less anonymous
// memory: v2 memory.max, v1 memory.limit_in_bytes, under /sys/fs/cgroup), as under a Slurm
// job's limit. -1 if /proc/meminfo is unreadable. An estimate: memory can go meanwhile.
int64_t AvailableMemoryBytes();
// OK if `bytes` fit in AvailableMemoryBytes() (or it is unknown), or are below
// kMemoryCheckFloor (not looked up: alone they cannot be what exhausts a machine); else
// FailedPrecondition: "<what> needs X GB, more than the Y GB this machine can give (...)<advice>".
inline constexpr double kMemoryCheckFloor = 64.0 * 1024 * 1024;
Status CheckMemoryFor(double bytes, const std::string& what, const std::string& advice);

}  // namespace gridfeed
