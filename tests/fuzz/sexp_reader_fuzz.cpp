// libFuzzer target for read_sexp: arbitrary bytes must either fail with a
// `byte N: ` message or read into a Value that prints and reads back equal.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace {

[[noreturn]] void fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "%s: %.*s\n", what, static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// True when `text` has a '#' starting a token outside strings, |...|, escapes
// and comments: a dispatch macro, which the reader must always refuse.
bool has_dispatch_macro(std::string_view text) {
  bool in_string = false;
  bool in_bars = false;
  bool in_comment = false;
  bool token_start = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_comment) {
      if (c == '\n') in_comment = false;
      token_start = true;
    } else if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      token_start = true;
    } else if (in_bars) {
      if (c == '\\') {
        ++i;
      } else if (c == '|') {
        in_bars = false;
      }
    } else if (c == '\\') {
      ++i;
      token_start = false;
    } else if (c == '|') {
      in_bars = true;
      token_start = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ';') {
      in_comment = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(' || c == ')' || c == '\'' ||
               c == '`' || c == ',') {
      token_start = true;
    } else {
      if (c == '#' && token_start) return true;
      token_start = false;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  passepartout::ReaderLimits limits;
  limits.max_bytes = 64 * 1024;
  limits.max_depth = 64;

  auto value = passepartout::read_sexp(text, limits);
  std::size_t consumed = 0;
  auto prefix = passepartout::read_sexp_prefix(text, &consumed, limits);
  if (!value) {
    if (value.error().message.rfind("byte ", 0) != 0) fail("error without an offset", value.error().message);
    return 0;
  }
  if (has_dispatch_macro(text)) fail("a '#' dispatch macro was read", text);
  // A whole-input read is also a prefix read of the same datum.
  if (!prefix || !(*prefix == *value) || consumed > size) fail("prefix read disagrees", text);

  const std::string printed = passepartout::to_sexp(*value);
  passepartout::ReaderLimits unbounded;
  unbounded.max_bytes = std::numeric_limits<std::size_t>::max();
  unbounded.max_depth = limits.max_depth;
  auto again = passepartout::read_sexp(printed, unbounded);
  if (!again) fail("printed form does not read", again.error().message + " in " + printed);
  if (!(*again == *value)) fail("printed form reads differently", printed);
  if (passepartout::to_sexp(*again) != printed) fail("printing is not stable", printed);
  return 0;
}
