#include "gridfeed/text/hf/byte_level_alphabet.h"

#include <array>

namespace gridfeed::text::hf {
namespace {

constexpr char32_t kAlphabetEnd = 0x144;  // one past the largest alphabet code point

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<char, 256 * 2> utf8{};  // two bytes per entry, the second unused for 1-byte ones
  std::array<uint8_t, 256> utf8_len{};
  std::array<int16_t, kAlphabetEnd> to_byte{};  // -1 where not in the alphabet
};

constexpr bool Printable(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr Tables Build() {
  Tables t;
  for (auto& v : t.to_byte) v = -1;
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) t.to_cp[b] = Printable(b) ? static_cast<char32_t>(b) : next++;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = t.to_cp[b];
    t.to_byte[c] = static_cast<int16_t>(b);
    if (c < 0x80) {
      t.utf8[2 * b] = static_cast<char>(c);
      t.utf8_len[b] = 1;
    } else {
      t.utf8[2 * b] = static_cast<char>(0xC0 | (c >> 6));
      t.utf8[2 * b + 1] = static_cast<char>(0x80 | (c & 0x3F));
      t.utf8_len[b] = 2;
    }
  }
  return t;
}

constexpr Tables kTables = Build();
static_assert(kTables.to_cp[' '] == 0x120 && kTables.to_cp['\n'] == 0x10A &&
              kTables.to_cp[0xAD] == 0x143);

}  // namespace

char32_t ByteLevelCodepoint(uint8_t b) { return kTables.to_cp[b]; }

std::string_view ByteLevelUtf8(uint8_t b) {
  return {kTables.utf8.data() + 2 * b, kTables.utf8_len[b]};
}

std::optional<uint8_t> ByteLevelByte(char32_t c) {
  if (c >= kAlphabetEnd || kTables.to_byte[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(kTables.to_byte[c]);
}

void AppendByteLevel(std::string_view bytes, std::string* out) {
  for (unsigned char b : bytes) out->append(kTables.utf8.data() + 2 * b, kTables.utf8_len[b]);
}

bool DecodeByteLevel(std::string_view text, std::string* out) {
  const size_t start = out->size();
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    char32_t c;
    if (b0 < 0x80) {
      c = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size()) {
      c = (static_cast<char32_t>(b0 & 0x1F) << 6) |
          (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      i += 2;
    } else {  // three- and four-byte characters are all outside the alphabet
      out->resize(start);
      return false;
    }
    const std::optional<uint8_t> b = ByteLevelByte(c);
    if (!b) {
      out->resize(start);
      return false;
    }
    out->push_back(static_cast<char>(*b));
  }
  return true;
}

}  // namespace gridfeed::text::hf
