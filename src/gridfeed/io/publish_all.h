// Publication of many files at once (an offline tool's output folder: thousands of tables for a
// thousand-file blend). Each file still appears complete or not at all: it is written to its
// own exclusive temporary (TempFile), and only fsynced temporaries are renamed. What changes is
// the cost: one fsync and one directory fsync per file force one journal commit each (about
// 8 ms per file on a virtual disk), while fsyncs issued together from several threads share
// commits, and each folder is fsynced once after its renames.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::io {

// Writes `parts` (one after the other) to a new temporary beside `target` and starts its
// writeback; its descriptor stays open for the fsync (OpenFileRoom says how many fit). The caller
// publishes it with PublishAll or TempFile::Publish; until then the temporary is removed by its
// destructor or a signal. Every write and the close are checked; IoError names the file.
// `written`, where given, is told after each piece of the last part (kWrittenPiece bytes) how
// many of its leading bytes are in the file (the page cache): a caller that needs them no more
// may give their memory back, so the page cache can take those pages instead of fresh ones.
inline constexpr size_t kWrittenPiece = size_t{4} << 20;
Result<TempFile> WriteTemp(const std::string& target,
                           std::span<const std::span<const std::byte>> parts,
                           const std::function<void(size_t bytes)>& written = {});

// fsyncs every temporary on up to `threads` threads, then renames each over its target (in
// the order given) and fsyncs each target folder once. If any sync fails, nothing is renamed
// and every temporary is removed. If a rename fails, it stops there and removes the
// temporaries not yet renamed; files already renamed stay, complete. Returns the first error.
// Not thread safe over `files`.
Status PublishAll(std::vector<TempFile>& files, int threads = 8);

// How many more descriptors this process may open, after raising its soft RLIMIT_NOFILE
// toward the hard limit when `wanted` more are needed (keeps 64 in reserve). Thread safe.
size_t OpenFileRoom(size_t wanted);

}  // namespace gridfeed::io
