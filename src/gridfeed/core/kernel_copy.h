// Copies within this process's memory made by the kernel (process_vm_writev/readv on the
// process itself), for the side of a copy that is a large shared mapping the process has not
// accessed from user mode (a node window just allocated, or just written this way):
//  - On a VM with shadow page tables (PVM; the bench VM) each first user-mode access to a
//    4 KiB page of a mapping costs 4-50 us, and the kernel's accesses do not. Writing 1.46 GB
//    into a fresh /dev/shm mapping: memcpy 2.0-2.5 s, the kernel 0.40-0.44 s; reading it back
//    for a digest: 1.7-1.8 s against 0.24 s (one thread).
//  - A destination 1-63 bytes past its source modulo 4 KiB makes the kernel's copy slow (4K
//    aliasing): CopyIntoUntouched takes such copies through a buffer half a page off;
//    CopyOutOfUntouched's caller places its own buffer.
// Both always complete the copy: where the kernel refuses (a seccomp filter returning an
// error, ENOSYS) or stops short, memcpy copies the rest, and after a refusal every later copy
// in that direction, process-wide, is memcpy. A filter that kills on these calls kills the
// process. Under AddressSanitizer they are memcpy, so it checks both sides. The ranges must
// not overlap. Thread safe.
#pragma once

#include <cstddef>

namespace gridfeed {

// Copies n bytes to `dst`, memory not accessed from user mode yet (the kernel writes it).
// Returns how many the kernel copied (the rest: memcpy).
size_t CopyIntoUntouched(std::byte* dst, const std::byte* src, size_t n);
// Copies n bytes from `src`, memory not accessed from user mode, into `dst`, memory the caller
// uses anyway (a small buffer it reuses). Returns how many the kernel copied.
size_t CopyOutOfUntouched(std::byte* dst, const std::byte* src, size_t n);

}  // namespace gridfeed
