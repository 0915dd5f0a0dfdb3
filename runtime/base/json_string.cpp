// JSON string quoting.
#include "base/json_string.hpp"

#include "base/utf8.hpp"

namespace passepartout {

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = replace_invalid_utf8(text);
    text = repaired;
  }
  out += '"';
  // Runs of characters that need no escape are appended whole: a record's
  // printed action and signal are mostly such runs.
  const auto plain = [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte >= 0x20 && byte != 0x7f && c != '"' && c != '\\';
  };
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t run = i;
    while (run < text.size() && plain(text[run])) ++run;
    out.append(text.data() + i, run - i);
    if (run == text.size()) break;
    i = run + 1;
    const char c = text[run];
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xf];
        }
    }
  }
  out += '"';
}

}  // namespace passepartout
