// SentencePiece's compiled normalization rules as the library's `Precompiled` normalizer runs
// them (tokenizers/src/normalizers/precompiled.rs over the spm_precompiled crate).
//
// precompiled_charsmap (standard base64) is [u32 LE trie size in bytes][trie: u32 LE units]
// [normalized: UTF-8 strings, each ended by NUL]. The trie is a darts-clone double array of byte
// keys whose values are offsets into `normalized`.
//
// The text is walked grapheme cluster by grapheme cluster (extended clusters; ICU's character
// break iterator stands for the unicode-segmentation crate). A cluster shorter than 6 bytes is
// first looked up whole; otherwise, or when that finds nothing, each of its characters is looked
// up alone and kept when nothing is found. A lookup is the crate's `transform`: the SHORTEST
// key that the chunk starts with wins (the search stops at a NUL byte), so a cluster whose
// first character has a rule is replaced by that character's rule as a whole, as in the
// library.
#include <unicode/ubrk.h>
#include <unicode/utext.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/text/base64.h"
#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/models.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

// precompiled_charsmap of real models is 200-300 KiB; far larger ones are refused.
constexpr size_t kMaxCharsmapBytes = size_t{64} << 20;

class PrecompiledNormalizer final : public Normalizer {
 public:
  PrecompiledNormalizer(std::vector<uint32_t> units, std::string normalized, std::string where)
      : units_(std::move(units)), normalized_(std::move(normalized)), where_(std::move(where)) {}

  Status Normalize(std::string* text) const override {
    if (text->empty()) return Status::Ok();
    UErrorCode err = U_ZERO_ERROR;
    UText* ut = utext_openUTF8(nullptr, text->data(), static_cast<int64_t>(text->size()), &err);
    std::unique_ptr<UText, decltype(&utext_close)> ut_closer(ut, &utext_close);
    UBreakIterator* bi = ubrk_open(UBRK_CHARACTER, "", nullptr, 0, &err);
    std::unique_ptr<UBreakIterator, decltype(&ubrk_close)> bi_closer(bi, &ubrk_close);
    if (U_SUCCESS(err)) ubrk_setUText(bi, ut, &err);
    if (U_FAILURE(err)) return Internal(std::string("ICU grapheme breaking: ") + u_errorName(err));

    const std::string_view in(*text);
    std::string out;
    out.reserve(in.size());
    int32_t start = ubrk_first(bi);
    for (int32_t end = ubrk_next(bi); end != UBRK_DONE; start = end, end = ubrk_next(bi)) {
      const std::string_view cluster = in.substr(start, end - start);
      if (cluster.size() < 6) {
        GRIDFEED_ASSIGN_OR_RETURN(auto norm, Transform(cluster));
        if (norm) {
          out.append(*norm);
          continue;
        }
      }
      for (size_t i = 0; i < cluster.size();) {
        const size_t n = Utf8CharLen(cluster, i);
        const std::string_view ch = cluster.substr(i, n);
        GRIDFEED_ASSIGN_OR_RETURN(auto norm, Transform(ch));
        out.append(norm ? *norm : ch);
        i += n;
      }
    }
    *text = std::move(out);
    return Status::Ok();
  }

 private:
  // darts-clone unit fields, as spm_precompiled reads them.
  static bool HasLeaf(uint32_t u) { return ((u >> 8) & 1) == 1; }
  static uint32_t Value(uint32_t u) { return u & ((1u << 31) - 1); }
  static uint32_t Label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
  static uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

  Status Broken() const {
    return DataLoss("precompiled_charsmap: the trie points outside itself (" + where_ +
                    "; the library panics)");
  }

  // The replacement of the shortest key `chunk` starts with; nullopt when there is none.
  Result<std::optional<std::string_view>> Transform(std::string_view chunk) const {
    if (units_.empty()) return Broken();
    size_t pos = Offset(units_[0]);
    for (unsigned char c : chunk) {
      if (c == 0) break;
      pos ^= c;
      if (pos >= units_.size()) return Broken();
      const uint32_t unit = units_[pos];
      if (Label(unit) != c) break;
      pos ^= Offset(unit);
      if (HasLeaf(unit)) {
        if (pos >= units_.size()) return Broken();
        const size_t index = Value(units_[pos]);
        if (index > normalized_.size() ||
            (index < normalized_.size() &&
             (static_cast<unsigned char>(normalized_[index]) & 0xC0) == 0x80)) {
          return DataLoss("precompiled_charsmap: a rule starts inside a character (" + where_ +
                          "; the library panics)");
        }
        size_t stop = normalized_.find('\0', index);
        if (stop == std::string::npos) stop = normalized_.size();
        return std::optional<std::string_view>(
            std::string_view(normalized_).substr(index, stop - index));
      }
    }
    return std::optional<std::string_view>();
  }

  std::vector<uint32_t> units_;
  std::string normalized_;
  std::string where_;
};

uint32_t ReadLe32(std::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}

}  // namespace

Result<std::unique_ptr<Normalizer>> MakePrecompiledNormalizer(const nlohmann::json& j,
                                                              const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string b64, RequiredString(j, "precompiled_charsmap", where));
  const JsonWhere fw = where.Field("precompiled_charsmap");
  if (b64.size() / 4 * 3 > kMaxCharsmapBytes) {
    return InvalidArgument(fw.str() + ": larger than gridfeed reads (" +
                           std::to_string(kMaxCharsmapBytes) + " bytes)");
  }
  // Strict, as the base64 crate's BASE64_STANDARD decodes: nonzero trailing bits are refused.
  const std::optional<std::string> decoded =
      DecodeBase64(b64, /*reject_nonzero_trailing_bits=*/true);
  if (!decoded) return InvalidArgument(fw.str() + ": not standard base64");
  const std::string& blob = *decoded;
  if (blob.size() < 4) return InvalidArgument(fw.str() + ": shorter than its trie size field");
  const uint32_t trie_bytes = ReadLe32(blob, 0);
  const size_t units = trie_bytes / 4;  // the crate reads whole units, ignoring a remainder
  if (units > (blob.size() - 4) / 4) {
    return InvalidArgument(fw.str() + ": the trie size " + std::to_string(trie_bytes) +
                           " exceeds the data");
  }
  std::vector<uint32_t> trie(units);
  for (size_t i = 0; i < units; ++i) trie[i] = ReadLe32(blob, 4 + 4 * i);
  std::string normalized = blob.substr(4 + 4 * units);
  if (Utf8ValidPrefix(normalized) != normalized.size()) {
    return InvalidArgument(fw.str() + ": the normalized strings are not valid UTF-8");
  }
  return std::unique_ptr<Normalizer>(
      std::make_unique<PrecompiledNormalizer>(std::move(trie), std::move(normalized), fw.str()));
}

}  // namespace gridfeed::text::hf
