// The Common Lisp standard syntax the reader and printer share: character
// classes and the shape of number tokens. Private to runtime/value.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace passepartout::sexp {

enum class CharClass : std::uint8_t {
  constituent,      // part of a token (also '#' inside a token, and every byte >= 0x80)
  whitespace,       // space, tab, newline, return, form feed
  terminating,      // ( ) " ; ' ` , end a token
  single_escape,    // backslash
  multiple_escape,  // |
};

inline constexpr std::array<CharClass, 256> kCharClasses = [] {
  std::array<CharClass, 256> classes{};
  classes.fill(CharClass::constituent);
  for (const char c : {' ', '\t', '\n', '\r', '\f'}) classes[static_cast<unsigned char>(c)] = CharClass::whitespace;
  for (const char c : {'(', ')', '"', ';', '\'', '`', ','}) {
    classes[static_cast<unsigned char>(c)] = CharClass::terminating;
  }
  classes[static_cast<unsigned char>('\\')] = CharClass::single_escape;
  classes[static_cast<unsigned char>('|')] = CharClass::multiple_escape;
  return classes;
}();

inline CharClass char_class(char c) noexcept { return kCharClasses[static_cast<unsigned char>(c)]; }

inline bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

inline bool is_exponent_marker(char c) noexcept {
  switch (c) {
    case 'e':
    case 'E':
    case 's':
    case 'S':
    case 'f':
    case 'F':
    case 'd':
    case 'D':
    case 'l':
    case 'L':
      return true;
    default:
      return false;
  }
}

inline constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
inline constexpr std::uint64_t kHighBits = 0x8080808080808080ULL;

// The first `n` bytes of a word (little-endian: its low ones), all of it for
// `n` of 8 or more.
constexpr std::uint64_t first_bytes_mask(std::size_t n) noexcept {
  return n >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * n)) - 1;
}

// The high bit of each byte of `word` that lies in [low, high]. Exact for
// bytes below 0x80; a byte at or above 0x80 may disturb the bytes after it
// (in memory order on little-endian), never those before it.
constexpr std::uint64_t bytes_in_range(std::uint64_t word, unsigned low, unsigned high) noexcept {
  const std::uint64_t at_least_low = word + kOnes * (0x80U - low);
  const std::uint64_t above_high = word + kOnes * (0x7FU - high);
  return at_least_low & ~above_high & kHighBits;
}

// The high bit of each byte of `word` that is not an upper-case ASCII letter,
// a digit or '-': the characters of nearly every protocol keyword.
constexpr std::uint64_t bytes_not_simple(std::uint64_t word) noexcept {
  const std::uint64_t simple =
      bytes_in_range(word, 'A', 'Z') | bytes_in_range(word, '0', '9') | bytes_in_range(word, '-', '-');
  return (~simple | word) & kHighBits;
}

// True when some byte of the 8-byte `word` equals `byte` (the zero-byte test
// on word ^ byte*0x01..01); lets string scans skip 8 plain bytes at a time.
inline bool word_has_byte(std::uint64_t word, unsigned char byte) noexcept {
  const std::uint64_t x = word ^ (kOnes * byte);
  return ((x - kOnes) & ~x & (kOnes << 7)) != 0;
}

// The index of the first '"' or '\\' in data[0, size), or `size` when there
// is none: what ends a string's plain run, for the reader and the printer.
// Sixteen bytes at a time where SSE2 is there, then eight, then one. When it
// returns `size`, bit 7 of `high` is set if some byte is not ASCII (its other
// bits, and all of it on any other return, mean nothing).
inline std::size_t find_quote_or_backslash(const char* data, std::size_t size, unsigned& high) noexcept {
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  __m128i all = _mm_setzero_si128();
  for (; i + 16 <= size; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i));
    const int special = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)));
    if (special != 0) return i + static_cast<std::size_t>(std::countr_zero(static_cast<unsigned>(special)));
    all = _mm_or_si128(all, bytes);
  }
  if (_mm_movemask_epi8(all) != 0) high |= 0x80U;  // one bit per byte: any of them makes bit 7
#endif
  for (; i + 8 <= size; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, data + i, sizeof word);
    if (word_has_byte(word, '"') || word_has_byte(word, '\\')) break;
    high |= (word & kHighBits) != 0 ? 0x80U : 0U;
  }
  for (; i < size; ++i) {
    const auto byte = static_cast<unsigned char>(data[i]);
    if (byte == '"' || byte == '\\') return i;
    high |= byte;
  }
  return size;
}

enum class NumberSyntax : std::uint8_t { none, integer, ratio, floating };

// What number, if any, an unescaped token denotes in base 10:
//   integer  [sign] digit+ [.]
//   ratio    [sign] digit+ / digit+
//   float    [sign] digit* . digit+ [exponent]  |  [sign] digit+ [. digit*] exponent
//   exponent marker [sign] digit+   (marker: e s f d l, any case)
inline NumberSyntax classify_number(std::string_view token) noexcept {
  std::size_t i = 0;
  const std::size_t n = token.size();
  auto digits = [&] {
    const std::size_t start = i;
    while (i < n && is_digit(token[i])) ++i;
    return i - start;
  };
  auto exponent_to_end = [&] {
    if (i >= n || !is_exponent_marker(token[i])) return false;
    ++i;
    if (i < n && (token[i] == '+' || token[i] == '-')) ++i;
    return digits() > 0 && i == n;
  };
  if (i < n && (token[i] == '+' || token[i] == '-')) ++i;
  const std::size_t whole = digits();
  if (i == n) return whole > 0 ? NumberSyntax::integer : NumberSyntax::none;
  if (token[i] == '/') {
    ++i;
    return whole > 0 && digits() > 0 && i == n ? NumberSyntax::ratio : NumberSyntax::none;
  }
  if (token[i] == '.') {
    ++i;
    const std::size_t fraction = digits();
    if (whole == 0 && fraction == 0) return NumberSyntax::none;
    if (i == n) return fraction > 0 ? NumberSyntax::floating : NumberSyntax::integer;
    return exponent_to_end() ? NumberSyntax::floating : NumberSyntax::none;
  }
  return whole > 0 && exponent_to_end() ? NumberSyntax::floating : NumberSyntax::none;
}

}  // namespace passepartout::sexp
