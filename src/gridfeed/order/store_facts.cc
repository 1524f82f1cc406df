#include "gridfeed/order/store_facts.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace gridfeed::order {
namespace {

constexpr size_t kBlockBytes = 4096;
constexpr int kSampledBlocks = 62;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

}  // namespace

StoreFacts FactsOf(const std::string& name, std::span<const std::byte> index,
                   std::span<const std::byte> data, uint64_t salt) {
  return FactsWithIndexDigest(name, XXH3_64bits(index.data(), index.size()), data, salt);
}

StoreFacts FactsWithIndexDigest(const std::string& name, uint64_t index_xxh3,
                                std::span<const std::byte> data, uint64_t salt) {
  return FactsWithIndexDigestRead(name, index_xxh3, data, salt, {});
}

StoreFacts FactsWithIndexDigestRead(
    const std::string& name, uint64_t index_xxh3, std::span<const std::byte> data, uint64_t salt,
    const std::function<bool(uint64_t offset, std::span<std::byte> out)>& read) {
  StoreFacts f;
  f.name = name;
  f.index_xxh3 = index_xxh3;
  f.data_bytes = data.size();
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset_withSeed(state, salt);
  std::byte buffer[kBlockBytes];
  auto block = [&](size_t offset) {
    const size_t n = std::min(kBlockBytes, data.size() - offset);
    if (read && read(offset, std::span(buffer, n))) {
      XXH3_64bits_update(state, buffer, n);
    } else {
      XXH3_64bits_update(state, data.data() + offset, n);
    }
  };
  if (!data.empty()) {
    block(0);
    block(data.size() > kBlockBytes ? data.size() - kBlockBytes : 0);
    for (int i = 0; i < kSampledBlocks; ++i) {
      block(SplitMix64(salt + static_cast<uint64_t>(i)) % data.size());
    }
  }
  f.data_sample_xxh3 = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return f;
}

std::string EncodeFacts(const std::vector<StoreFacts>& facts) {
  std::string out;
  for (const auto& f : facts) {
    out += Hex(f.index_xxh3) + " " + std::to_string(f.data_bytes) + " " + Hex(f.data_sample_xxh3) +
           " " + f.name + "\n";
  }
  return out;
}

std::vector<StoreFacts> DecodeFacts(const std::string& text) {
  std::vector<StoreFacts> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    StoreFacts f;
    char name[4096] = {0};
    if (std::sscanf(line.c_str(), "%16" SCNx64 " %" SCNu64 " %16" SCNx64 " %4095[^\n]",
                    &f.index_xxh3, &f.data_bytes, &f.data_sample_xxh3, name) != 4) {
      return {};
    }
    f.name = name;
    out.push_back(f);
  }
  return out;
}

std::string DescribeFactsDifference(const std::vector<StoreFacts>& mine,
                                    const std::vector<StoreFacts>& reference) {
  if (mine.size() != reference.size()) {
    return "it has " + std::to_string(mine.size()) + " token stores, rank 0 " +
           std::to_string(reference.size());
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& a = mine[i];
    const auto& b = reference[i];
    const std::string store = "token store '" + a.name + "'";
    if (a.name != b.name) return store + " is '" + b.name + "' on rank 0";
    if (a.index_xxh3 != b.index_xxh3) {
      return store + ": its .idx differs from rank 0's (XXH3 " + Hex(a.index_xxh3) + " vs " +
             Hex(b.index_xxh3) + ")";
    }
    if (a.data_bytes != b.data_bytes) {
      return store + ": its .bin has " + std::to_string(a.data_bytes) + " bytes, rank 0's " +
             std::to_string(b.data_bytes);
    }
    if (a.data_sample_xxh3 != b.data_sample_xxh3) {
      return store + ": its .bin holds other tokens than rank 0's (sampled blocks differ)";
    }
  }
  return "";
}

bool TestingFullStoreCheck() {
  static const bool full = [] {
    const char* v = std::getenv("GRIDFEED_TESTING_FULL_STORE_CHECK");
    return v != nullptr && std::string(v) == "1";
  }();
  return full;
}

FileFacts StatFile(const std::string& path) {
  FileFacts f;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return f;
  f.exists = true;
  f.device = static_cast<uint64_t>(st.st_dev);
  f.inode = static_cast<uint64_t>(st.st_ino);
  f.size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  f.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return f;
}

bool SameFile(const FileFacts& a, const FileFacts& b) {
  return a.exists && b.exists && a.inode == b.inode && a.size == b.size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
}

std::string EncodeFileFacts(const std::vector<FileFacts>& files) {
  std::string out;
  for (const auto& f : files) {
    out += std::to_string(f.exists ? 1 : 0) + " " + std::to_string(f.device) + " " +
           std::to_string(f.inode) + " " + std::to_string(f.size) + " " +
           std::to_string(f.mtime_ns) + " " + std::to_string(f.ctime_ns) + "\n";
  }
  return out;
}

std::vector<FileFacts> DecodeFileFacts(const std::string& text) {
  std::vector<FileFacts> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    FileFacts f;
    int exists = 0;
    char rest = 0;
    if (std::sscanf(line.c_str(),
                    "%d %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNd64 " %" SCNd64 " %c", &exists,
                    &f.device, &f.inode, &f.size, &f.mtime_ns, &f.ctime_ns, &rest) != 6 ||
        (exists != 0 && exists != 1)) {
      return {};
    }
    f.exists = exists == 1;
    out.push_back(f);
  }
  return out;
}

std::string DescribeSizeDifference(const std::vector<std::string>& paths,
                                   const std::vector<FileFacts>& mine,
                                   const std::vector<FileFacts>& reference) {
  if (mine.size() != reference.size() || paths.size() != mine.size()) {
    return "it has " + std::to_string(mine.size()) + " token files, rank 0 " +
           std::to_string(reference.size());
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i].exists && reference[i].exists && mine[i].size != reference[i].size) {
      return "token file '" + paths[i] +
             "' differs from rank 0's: " + std::to_string(mine[i].size) + " bytes here, " +
             std::to_string(reference[i].size) + " there";
    }
  }
  return "";
}

}  // namespace gridfeed::order
