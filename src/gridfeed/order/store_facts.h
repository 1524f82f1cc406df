// What identifies a token store's contents cheaply, so every reader can prove it reads the
// same data as world rank 0 (node-local copies are common): the XXH3-64 of the whole index, the
// data file's size and the XXH3-64 of data blocks sampled at offsets derived from a salt (the
// run's fingerprint), so a same-size copy with other tokens is caught without reading terabytes.
// Pure; thread safe.
//
// Proving the same files cheaply (the feeder's "open/check token stores", feed/feeder_startup.cc):
// world rank 0 checks and digests every index once (its build reads them anyway) and broadcasts
// the facts above and, per token file, what stat(2) says of it (FileFacts). Every other reader
// stats its own files, O(files): a file of another size is named at once; a file that is rank
// 0's very file (SameFile: inode, size, mtime and ctime to the nanosecond) needs nothing more
// (its structure is checked at open, rank 0 checked the rest); only a reader holding other file
// objects (a node-local copy) digests them, once per node (its node leader; peers with the
// leader's very files take its facts), and compares with rank 0's facts. So a job on one
// machine or on a shared filesystem reads no index bytes beyond what its reads touch; a copied
// corpus costs one pass over its indexes per node, which is what proving a copy takes.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace gridfeed::order {

struct StoreFacts {
  std::string name;  // the token store as the options name it
  uint64_t index_xxh3 = 0;
  uint64_t data_bytes = 0;
  uint64_t data_sample_xxh3 = 0;
  bool operator==(const StoreFacts&) const = default;
};

// Blocks of 4 KiB: the first, the last and 62 more at salt-derived offsets.
StoreFacts FactsOf(const std::string& name, std::span<const std::byte> index,
                   std::span<const std::byte> data, uint64_t salt);
// The same facts where the index's XXH3-64 is known already (io::IndexedDataset::index_xxh3).
// (Its own name: an `index` of `{}` must never pick this one.)
StoreFacts FactsWithIndexDigest(const std::string& name, uint64_t index_xxh3,
                                std::span<const std::byte> data, uint64_t salt);

// The same facts, the data's sampled blocks read by `read(offset, out)` (false: fall back to
// `data`), e.g. positional reads that do not map pages nor read ahead around them: the 64 blocks
// of each of 1,000 files faulted in through mappings cost seconds, with readahead around each.
StoreFacts FactsWithIndexDigestRead(
    const std::string& name, uint64_t index_xxh3, std::span<const std::byte> data, uint64_t salt,
    const std::function<bool(uint64_t offset, std::span<std::byte> out)>& read);

// One line per store, for a broadcast; Decode is its inverse (empty on malformed text).
std::string EncodeFacts(const std::vector<StoreFacts>& facts);
std::vector<StoreFacts> DecodeFacts(const std::string& text);
// The first difference between `mine` and `reference`, naming store and field; empty if none.
std::string DescribeFactsDifference(const std::vector<StoreFacts>& mine,
                                    const std::vector<StoreFacts>& reference);

// Measurements only: GRIDFEED_TESTING_FULL_STORE_CHECK=1 makes readers prove their files as
// before issue 49 (no reader trusts rank 0's file identities; sampled blocks faulted in through
// the mappings, on one thread; no sleeping wait), so one run can time both.
bool TestingFullStoreCheck();

// What stat(2) says of one token file. `exists` false: it could not be stat'ed (the open then
// reports why).
struct FileFacts {
  bool exists = false;
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileFacts&) const = default;
};
FileFacts StatFile(const std::string& path);
// Whether `a` and `b` (stat'ed on any two machines) are the very same file object: inode, size,
// mtime and ctime equal to the nanosecond. The device is left out: a shared filesystem may
// number its mount differently on each node. A copy has a ctime of its own (no user sets it),
// and a file changed in place gets a new one; a disk image cloned block by block holds the same
// bytes until changed. Both must exist. (As for any check by file times: a file changed twice
// within one tick of the filesystem's clock, a few milliseconds, may keep its times.)
bool SameFile(const FileFacts& a, const FileFacts& b);
// One line per file; Decode is its inverse (empty on malformed text).
std::string EncodeFileFacts(const std::vector<FileFacts>& files);
std::vector<FileFacts> DecodeFileFacts(const std::string& text);
// The first of `paths` whose size in `mine` differs from `reference`'s (both existing), as
// "token file 'P' differs from rank 0's: N bytes here, M there"; "it has N token files, rank 0 M"
// for lists of other lengths; empty if none.
std::string DescribeSizeDifference(const std::vector<std::string>& paths,
                                   const std::vector<FileFacts>& mine,
                                   const std::vector<FileFacts>& reference);

}  // namespace gridfeed::order
