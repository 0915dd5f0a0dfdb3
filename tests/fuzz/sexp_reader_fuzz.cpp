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
