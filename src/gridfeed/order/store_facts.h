// What identifies a token store's contents cheaply, so every reader can prove it reads the
// same data as world rank 0 (node-local copies are common): the XXH3-64 of the whole index, the
// data file's size and the XXH3-64 of data blocks sampled at offsets derived from a salt (the
// run's fingerprint), so a same-size copy with other tokens is caught without reading terabytes.
// Pure; thread safe.
#pragma once

#include <cstdint>
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

// One line per store, for a broadcast; Decode is its inverse (empty on malformed text).
std::string EncodeFacts(const std::vector<StoreFacts>& facts);
std::vector<StoreFacts> DecodeFacts(const std::string& text);
// The first difference between `mine` and `reference`, naming store and field; empty if none.
std::string DescribeFactsDifference(const std::vector<StoreFacts>& mine,
                                    const std::vector<StoreFacts>& reference);

}  // namespace gridfeed::order
