// Context-parallel zigzag slicing (Megatron's per-sequence load balancing): the sequence
// dimension is cut into 2*cp chunks and rank r keeps chunk r followed by chunk 2*cp-1-r.
// Pure; thread safe.
#pragma once

#include <cstdint>
#include <vector>

namespace gridfeed::order {

// `data` is [rows, seq_len, inner] in C order (inner = 1 for [mbs, S] tensors; for the
// attention mask [mbs, 1, S, S] use rows = mbs, inner = S: query rows are cut, key columns
// stay whole). Returns [rows, seq_len / cp, inner]. REQUIRES seq_len % (2 * cp) == 0.
template <typename T>
std::vector<T> CpZigzagSlice(const std::vector<T>& data, int64_t rows, int64_t seq_len,
                             int64_t inner, int64_t cp_size, int64_t cp_rank) {
  const int64_t chunk = seq_len / (2 * cp_size);
  std::vector<T> out;
  out.reserve(static_cast<size_t>(rows * 2 * chunk * inner));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c : {cp_rank, 2 * cp_size - 1 - cp_rank}) {
      auto begin = data.begin() + (r * seq_len + c * chunk) * inner;
      out.insert(out.end(), begin, begin + chunk * inner);
    }
  }
  return out;
}

}  // namespace gridfeed::order
