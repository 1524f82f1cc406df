// Copies within this process's own memory made by the kernel (process_vm_writev/readv on the
// process itself) rather than by user-space loads and stores, for the side of the copy that
// is a large shared mapping this process has not touched yet (a node window):
//  - The kernel reaches those pages through its own mapping of memory, so the process never
//    touches them. On a VM with shadow page tables (the 2-vCPU bench VM: PVM), the first user
//    access to each 4 KiB page of a mapping costs 4-50 us; 1.46 GB into a fresh /dev/shm
//    mapping took 2.0-2.5 s by memcpy against 0.40-0.44 s through the kernel, and reading it
//    back for a digest 1.7-1.8 s against 0.24 s (one thread each).
//  - Elsewhere it costs about what populating the pages and memcpy cost.
// Both always complete the copy: where the kernel refuses (seccomp, ENOSYS) or stops short,
// the rest is copied with memcpy, so they are advice about how, never about whether. The
// ranges must not overlap and must be readable (src) and writable (dst). Thread safe.
#pragma once

#include <cstddef>

namespace gridfeed {

// Copies n bytes to `dst`, a mapping the caller has not touched (the kernel writes it).
void CopyIntoUntouched(std::byte* dst, const std::byte* src, size_t n);
// Copies n bytes from `src`, a mapping the caller has not touched (the kernel reads it), to
// `dst`, memory the caller uses anyway (a small buffer it reuses).
void CopyOutOfUntouched(std::byte* dst, const std::byte* src, size_t n);

}  // namespace gridfeed
