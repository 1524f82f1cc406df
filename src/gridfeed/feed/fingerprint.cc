#include "gridfeed/feed/fingerprint.h"

#include <xxhash.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "gridfeed/io/mmap_file.h"

namespace gridfeed::feed {

std::string CanonicalConfig(const config::DataOptions& o, const order::BuiltDatasets& b) {
  nlohmann::json data = nlohmann::json::object();
  for (const auto& split : b.splits) {
    if (!split) continue;
    for (const auto& m : split->mids) {
      if (data.contains(m.prefix)) continue;
      const auto idx = m.dataset->index_bytes();
      char digest[17];
      std::snprintf(digest, sizeof(digest), "%016llx",
                    static_cast<unsigned long long>(XXH3_64bits(idx.data(), idx.size())));
      auto bin = io::FileSize(m.prefix + ".bin");
      data[m.prefix] = {{"idx_bytes", idx.size()},
                        {"bin_bytes", bin.ok() ? static_cast<int64_t>(*bin) : -1},
                        {"idx_xxh3", digest}};
    }
  }
  nlohmann::json j = nlohmann::json::parse(config::CanonicalText(o));
  j["data-files"] = data;
  j["sampler"] = "pretraining";
  return j.dump();
}

std::string FingerprintOf(const std::string& canonical) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(canonical.data(), canonical.size())));
  return hex;
}

std::string DescribeChange(const std::string& before, const std::string& after) {
  auto a = nlohmann::json::parse(before, nullptr, false);
  auto b = nlohmann::json::parse(after, nullptr, false);
  if (a.is_discarded() || b.is_discarded() || !a.is_object() || !b.is_object()) {
    return "the configuration text differs";
  }
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key)) return key + ": present in the checkpoint, absent now";
    if (b[key] != value) return key + ": " + value.dump() + " -> " + b[key].dump();
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) return key + ": absent in the checkpoint, " + value.dump() + " now";
  }
  return "the configuration text differs";
}

}  // namespace gridfeed::feed
