// UTF-8 validation and code-point counting: sixteen bytes at a time over ASCII runs,
// byte-wise (Unicode Table 3-7) elsewhere.
#include "base/utf8.hpp"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace passepartout {

namespace {

constexpr std::uint64_t kHighBits = 0x8080808080808080ULL;

std::uint64_t load_word(const unsigned char* p) noexcept {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

// Number of bytes in the word that start a code point (are not 10xxxxxx).
int count_starts(std::uint64_t word) noexcept {
  const std::uint64_t continuation = word & ~(word << 1) & kHighBits;
  // One bit per byte (bit 7 of each): summing the bytes by multiplication is
  // a popcount without the library call std::popcount becomes without -mpopcnt.
  return 8 - static_cast<int>(((continuation >> 7) * 0x0101010101010101ULL) >> 56);
}

// True when the 16 (64) bytes at `p` are all ASCII: SSE2 (every x86-64 has
// it) tests 16 at once, elsewhere two words at a time.
#if defined(__SSE2__)
bool ascii_16(const unsigned char* p) noexcept {
  return _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))) == 0;
}
bool ascii_64(const unsigned char* p) noexcept {
  const auto* v = reinterpret_cast<const __m128i*>(p);
  const __m128i any = _mm_or_si128(_mm_or_si128(_mm_loadu_si128(v), _mm_loadu_si128(v + 1)),
                                   _mm_or_si128(_mm_loadu_si128(v + 2), _mm_loadu_si128(v + 3)));
  return _mm_movemask_epi8(any) == 0;
}
#else
bool ascii_16(const unsigned char* p) noexcept { return ((load_word(p) | load_word(p + 8)) & kHighBits) == 0; }
bool ascii_64(const unsigned char* p) noexcept {
  return ascii_16(p) && ascii_16(p + 16) && ascii_16(p + 32) && ascii_16(p + 48);
}
#endif

bool in_range(unsigned char byte, unsigned char low, unsigned char high) noexcept {
  return byte >= low && byte <= high;
}

}  // namespace

Utf8Scan scan_utf8(std::string_view text) noexcept {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t size = text.size();
  std::size_t i = 0;
  // Code points are the bytes that are not continuation bytes (10xxxxxx).
  std::size_t continuations = 0;
  while (i < size) {
    if (i + 64 <= size && ascii_64(bytes + i)) {
      i += 64;
      continue;
    }
    if (i + 16 <= size && ascii_16(bytes + i)) {
      i += 16;
      continue;
    }
    if (i + 8 <= size && (load_word(bytes + i) & kHighBits) == 0) {
      i += 8;
      continue;
    }
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // Second-byte range and sequence length per lead byte (Table 3-7).
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (in_range(lead, 0xC2, 0xDF)) {
      length = 2;
    } else if (lead == 0xE0) {
      length = 3;
      low = 0xA0;
    } else if (in_range(lead, 0xE1, 0xEC) || in_range(lead, 0xEE, 0xEF)) {
      length = 3;
    } else if (lead == 0xED) {
      length = 3;
      high = 0x9F;
    } else if (lead == 0xF0) {
      length = 4;
      low = 0x90;
    } else if (in_range(lead, 0xF1, 0xF3)) {
      length = 4;
    } else if (lead == 0xF4) {
      length = 4;
      high = 0x8F;
    } else {
      return {i, i - continuations};
    }
    if (i + length > size || !in_range(bytes[i + 1], low, high)) return {i, i - continuations};
    for (std::size_t k = 2; k < length; ++k) {
      if (!in_range(bytes[i + k], 0x80, 0xBF)) return {i, i - continuations};
    }
    i += length;
    continuations += length - 1;
  }
  return {std::nullopt, size - continuations};
}

std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept { return scan_utf8(text).invalid_at; }

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  while (std::optional<std::size_t> bad = find_invalid_utf8(text)) {
    out.append(text.substr(0, *bad)).append("\xEF\xBF\xBD");
    text.remove_prefix(*bad + 1);
  }
  out.append(text);
  return out;
}

std::size_t byte_length_of_code_points(std::string_view text, std::size_t n) noexcept {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t size = text.size();
  // Find where code point number `n` (0-based) starts: that is the length.
  std::size_t remaining = n;
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const auto starts = static_cast<std::size_t>(count_starts(load_word(bytes + i)));
    if (starts > remaining) break;
    remaining -= starts;
  }
  for (; i < size; ++i) {
    if ((bytes[i] & 0xC0) == 0x80) continue;
    if (remaining == 0) return i;
    --remaining;
  }
  return remaining == 0 ? size : std::string_view::npos;
}

std::string bounded_text(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t keep = max_bytes;
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0U) == 0x80U) --keep;
  std::string out(text.substr(0, keep));
  out += "\n[... ";
  out += std::to_string(text.size() - keep);
  out += " more bytes left out]";
  return out;
}

}  // namespace passepartout
