// libFuzzer target for the JSON bridge: arbitrary bytes must either fail with
// a `byte N: ` message or give a Value whose JSON and s-expression forms read back.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "value/json_bridge.hpp"
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
  constexpr std::size_t kMaxDepth = 64;

  auto value = passepartout::json_to_value(text, kMaxDepth);
  if (!value) {
    if (value.error().message.rfind("byte ", 0) != 0) fail("error without an offset", value.error().message);
    return 0;
  }

  // The s-expression form reads back as the same Value.
  const std::string printed = passepartout::to_sexp(*value);
  passepartout::ReaderLimits limits;
  limits.max_bytes = std::numeric_limits<std::size_t>::max();
  limits.max_depth = kMaxDepth;
  auto back = passepartout::read_sexp(printed, limits);
  if (!back) fail("printed form does not read", back.error().message + " in " + printed);
  if (!(*back == *value)) fail("printed form reads differently", printed);

  // The JSON written is valid JSON; after one pass (which merges repeated and
  // case-folded keys) writing and parsing again changes nothing.
  const std::string json = passepartout::value_to_json(*value);
  auto once = passepartout::json_to_value(json, kMaxDepth);
  if (!once) fail("written JSON does not parse", once.error().message + " in " + json);
  const std::string json_again = passepartout::value_to_json(*once);
  auto twice = passepartout::json_to_value(json_again, kMaxDepth);
  if (!twice) fail("written JSON does not parse", twice.error().message + " in " + json_again);
  if (!(*twice == *once)) fail("JSON does not settle", json_again);
  return 0;
}
