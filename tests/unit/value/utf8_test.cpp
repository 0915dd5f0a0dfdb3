// Tests for the UTF-8 helpers: validation offsets (overlongs, surrogates, range,
// truncation) and code-point counting, checked against a byte-at-a-time model.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>

#include "base/utf8.hpp"

using passepartout::byte_length_of_code_points;
using passepartout::find_invalid_utf8;
using passepartout::is_valid_utf8;
using passepartout::scan_utf8;

namespace {

std::string encode(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// A random valid string mixing ASCII runs with 2-, 3- and 4-byte characters.
std::string random_text(std::mt19937& rng, std::size_t code_points) {
  std::string out;
  std::uniform_int_distribution<int> pick(0, 9);
  for (std::size_t i = 0; i < code_points; ++i) {
    const int kind = pick(rng);
    if (kind < 6) {
      out += encode(static_cast<char32_t>(0x20 + rng() % 0x5F));
    } else if (kind < 8) {
      out += encode(static_cast<char32_t>(0x80 + rng() % (0x800 - 0x80)));
    } else if (kind < 9) {
      char32_t cp = static_cast<char32_t>(0x800 + rng() % (0x10000 - 0x800));
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xE000;
      out += encode(cp);
    } else {
      out += encode(static_cast<char32_t>(0x10000 + rng() % (0x110000 - 0x10000)));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("utf8 accepts ASCII, multi-byte characters and the highest code point", "[value][utf8]") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain ASCII text that is longer than one word"));
  CHECK(is_valid_utf8("naïve café"));
  CHECK(is_valid_utf8("emoji 😀 and 日本語"));
  CHECK(is_valid_utf8(std::string("nul \0 inside", 12)));
  CHECK(is_valid_utf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  CHECK(is_valid_utf8("\xEF\xBF\xBF"));      // U+FFFF
  CHECK(is_valid_utf8("\xED\x9F\xBF"));      // U+D7FF, just below the surrogates
  CHECK(is_valid_utf8("\xEE\x80\x80"));      // U+E000, just above them
}

TEST_CASE("utf8 reports the offset of an overlong encoding", "[value][utf8]") {
  CHECK(find_invalid_utf8("ab\xC0\x80") == 2u);
  CHECK(find_invalid_utf8("ab\xC1\xBF") == 2u);
  CHECK(find_invalid_utf8("\xE0\x80\x80") == 0u);
  CHECK(find_invalid_utf8("\xE0\x9F\xBF") == 0u);
  CHECK(find_invalid_utf8("x\xF0\x80\x80\x80") == 1u);
  CHECK(find_invalid_utf8("x\xF0\x8F\xBF\xBF") == 1u);
}

TEST_CASE("utf8 rejects surrogates and code points above U+10FFFF", "[value][utf8]") {
  CHECK(find_invalid_utf8("abc\xED\xA0\x80") == 3u);   // U+D800
  CHECK(find_invalid_utf8("abc\xED\xBF\xBF") == 3u);   // U+DFFF
  CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == 0u);  // U+110000
  CHECK(find_invalid_utf8("\xF5\x80\x80\x80") == 0u);
  CHECK(find_invalid_utf8("\xFF") == 0u);
  CHECK(find_invalid_utf8("\xFE") == 0u);
}

TEST_CASE("utf8 rejects stray continuation bytes and truncated sequences", "[value][utf8]") {
  CHECK(find_invalid_utf8("a\x80") == 1u);
  CHECK(find_invalid_utf8("caf\xC3") == 3u);
  CHECK(find_invalid_utf8("\xE2\x82") == 0u);
  CHECK(find_invalid_utf8("\xE2\x28\xA1") == 0u);
  CHECK(find_invalid_utf8("\xF0\x9F\x98") == 0u);
  CHECK(find_invalid_utf8("\xC3\xA9\xC3") == 2u);
}

TEST_CASE("utf8 finds an invalid byte after a long ASCII run", "[value][utf8]") {
  for (std::size_t prefix = 0; prefix < 140; ++prefix) {  // every offset in and past a 64-byte block
    std::string text(prefix, 'a');
    text += "\xC3\x28";
    text += std::string(17, 'b');
    CHECK(find_invalid_utf8(text) == prefix);
  }
}

TEST_CASE("utf8 counts code points, not bytes", "[value][utf8]") {
  const auto count = [](std::string_view text) { return scan_utf8(text).code_points; };
  CHECK(count("") == 0);
  CHECK(count("naïve café") == 10);
  CHECK(count("😀") == 1);
  CHECK(count("(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE))") == 0x2C);
  CHECK(count("日本語 and more ASCII after it, past a word") == 40);
}

TEST_CASE("utf8 gives the byte length of a code-point prefix", "[value][utf8]") {
  const std::string text = "naïve café";  // 10 code points, 12 bytes
  CHECK(byte_length_of_code_points(text, 0) == 0);
  CHECK(byte_length_of_code_points(text, 2) == 2);
  CHECK(byte_length_of_code_points(text, 3) == 4);
  CHECK(byte_length_of_code_points(text, 10) == 12);
  CHECK(byte_length_of_code_points(text, 11) == std::string_view::npos);
  CHECK(byte_length_of_code_points("", 0) == 0);
  CHECK(byte_length_of_code_points("", 1) == std::string_view::npos);
  CHECK(byte_length_of_code_points("abcdefghijklmnop😀q", 17) == 20);
}

TEST_CASE("utf8 counting agrees with a byte-at-a-time model on random text", "[value][utf8]") {
  std::mt19937 rng(20240517);
  for (int round = 0; round < 300; ++round) {
    const std::size_t length = rng() % 80;
    const std::string text = random_text(rng, length);
    REQUIRE(is_valid_utf8(text));
    REQUIRE(scan_utf8(text).code_points == length);
    std::size_t offset = 0;
    for (std::size_t n = 0; n <= length; ++n) {
      REQUIRE(byte_length_of_code_points(text, n) == offset);
      if (n < length) {
        ++offset;
        while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
      }
    }
    REQUIRE(byte_length_of_code_points(text, length + 1) == std::string_view::npos);
  }
}

TEST_CASE("utf8 scan validates and counts in one pass", "[value][utf8]") {
  std::mt19937 rng(20261122);
  for (int round = 0; round < 300; ++round) {
    const std::size_t length = rng() % 120;
    const std::string text = random_text(rng, length);
    const auto scan = scan_utf8(text);
    REQUIRE_FALSE(scan.invalid_at.has_value());
    REQUIRE(scan.code_points == length);
    // Broken at a random byte: the offset is find_invalid_utf8's, the count the prefix's.
    if (text.empty()) continue;
    std::string broken = text;
    const std::size_t at = rng() % broken.size();
    broken[at] = '\xFF';
    const auto bad = scan_utf8(broken);
    REQUIRE(bad.invalid_at == find_invalid_utf8(broken));
    REQUIRE(bad.invalid_at.has_value());
    std::size_t starts = 0;  // the valid prefix's code points, byte by byte
    for (std::size_t i = 0; i < *bad.invalid_at; ++i) {
      if ((static_cast<unsigned char>(broken[i]) & 0xC0) != 0x80) ++starts;
    }
    REQUIRE(bad.code_points == starts);
  }
}
