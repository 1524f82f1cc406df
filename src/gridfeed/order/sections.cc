#include "gridfeed/order/sections.h"

#include <xxhash.h>

#include <algorithm>

namespace gridfeed::order {

namespace {
constexpr uint64_t kSectionsMagic = 0x314e544345534647;  // "GFSECTN1"
constexpr size_t kSectionsHead = 4 * sizeof(uint64_t);   // magic, digest, producer, count
}  // namespace

SectionWriter::SectionWriter(int producer) {
  for (uint64_t w : {kSectionsMagic, uint64_t{0}, static_cast<uint64_t>(producer), uint64_t{0}}) {
    PutWord(w);
  }
}

std::vector<std::byte> SectionWriter::Seal() && {
  std::memcpy(out_.data() + 3 * sizeof(uint64_t), &count_, sizeof(count_));
  const uint64_t digest = XXH3_64bits(out_.data() + kSectionsHead, out_.size() - kSectionsHead);
  std::memcpy(out_.data() + sizeof(uint64_t), &digest, sizeof(digest));
  return std::move(out_);
}

Result<SectionReader> SectionReader::Open(std::span<const std::byte> bytes, int producer) {
  std::string who = "the sections from producer " + std::to_string(producer);
  uint64_t head[4] = {0, 0, 0, 0};
  if (bytes.size() < kSectionsHead) return DataLoss(who + " are truncated");
  std::memcpy(head, bytes.data(), kSectionsHead);
  if (head[0] != kSectionsMagic || head[2] != static_cast<uint64_t>(producer)) {
    return DataLoss(who + " are not sections");
  }
  if (XXH3_64bits(bytes.data() + kSectionsHead, bytes.size() - kSectionsHead) != head[1]) {
    return DataLoss(who + " fail their digest (changed on the way?): refused");
  }
  return SectionReader(bytes.subspan(kSectionsHead), head[3], std::move(who));
}

bool SectionReader::Word(uint64_t* w) {
  std::vector<uint64_t> one;
  if (!Take(1, &one)) return false;
  *w = one[0];
  return true;
}

}  // namespace gridfeed::order
