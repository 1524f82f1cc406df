// Token stores made up for tests too large to ship: an index of n sequences, one document each,
// of min_length + (i % 2) int32 tokens, and a sparse .bin of the size the index implies.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gridfeed/io/index_file.h"

namespace gridfeed::testing {

// The index's bytes, and in `token_bytes` (where given) the size of the .bin it describes.
inline std::vector<std::byte> SyntheticIndex(uint64_t n, int32_t min_length,
                                             int64_t* token_bytes = nullptr) {
  std::vector<int32_t> lengths(n);
  std::vector<int64_t> pointers(n), docs(n + 1);
  int64_t at = 0;
  for (uint64_t i = 0; i < n; ++i) {
    lengths[i] = min_length + static_cast<int32_t>(i % 2);
    pointers[i] = at;
    at += int64_t{lengths[i]} * 4;
    docs[i] = static_cast<int64_t>(i);
  }
  docs[n] = static_cast<int64_t>(n);
  if (token_bytes != nullptr) *token_bytes = at;
  std::vector<std::byte> b(sizeof(io::kIndexMagic));
  std::memcpy(b.data(), io::kIndexMagic, sizeof(io::kIndexMagic));
  auto put = [&b](const void* p, size_t size) {
    const auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + size);
  };
  const uint64_t version = 1, doc_count = n + 1;
  const uint8_t code = 4;  // int32
  put(&version, 8);
  put(&code, 1);
  put(&n, 8);
  put(&doc_count, 8);
  put(lengths.data(), n * 4);
  put(pointers.data(), n * 8);
  put(docs.data(), doc_count * 8);
  return b;
}

// Writes `prefix`.idx and a sparse `prefix`.bin; `bad_pointer` moves the sequence pointer in
// the middle by one token, which only the index's full check finds. False on a failed write.
inline bool WriteSyntheticStore(const std::string& prefix, uint64_t n, int32_t min_length,
                                bool bad_pointer = false) {
  int64_t bytes = 0;
  std::vector<std::byte> idx = SyntheticIndex(n, min_length, &bytes);
  if (bad_pointer) {
    int64_t p;
    const size_t at = 34 + n * 4 + (n / 2) * 8;  // header, lengths, then pointers[n / 2]
    std::memcpy(&p, idx.data() + at, 8);
    p += 4;
    std::memcpy(idx.data() + at, &p, 8);
  }
  {
    std::ofstream out(prefix + ".idx", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(idx.data()), static_cast<std::streamsize>(idx.size()));
    if (!out.good()) return false;
  }
  const int fd = ::open((prefix + ".bin").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return false;
  const bool sized = ::ftruncate(fd, bytes) == 0;
  return ::close(fd) == 0 && sized;
}

}  // namespace gridfeed::testing
