// libFuzzer target for the Value codec's decoder: arbitrary bytes must either
// fail with a `byte N: ` message (N within the input) or give values that
// encode back to exactly the bytes they came from and whose printed forms
// read back as the same Values.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"
#include "value/value_codec.hpp"

namespace {

[[noreturn]] void fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "%s: %.*s\n", what, static_cast<int>(detail.size()), detail.data());
  std::abort();
}

void check_error(const std::string& message, std::size_t size) {
  if (message.rfind("byte ", 0) != 0) fail("error without an offset", message);
  if (std::strtoull(message.c_str() + 5, nullptr, 10) > size) fail("error offset past the input", message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  passepartout::DecodeLimits limits;
  limits.max_depth = 64;
  limits.max_nodes = 1 << 16;

  // A frame: the version byte, then values until the end or an error.
  passepartout::ValueDecoder decoder(bytes, limits);
  if (auto version = decoder.read_version(); !version) {
    check_error(version.error().message, size);
    return 0;
  }
  while (!decoder.at_end()) {
    const std::size_t start = decoder.offset();
    auto value = decoder.next();
    if (!value) {
      check_error(value.error().message, size);
      if (decoder.offset() != start) fail("a failed value moved the decoder", value.error().message);
      return 0;
    }
    // One encoding per value: encoding it again gives the bytes it came from.
    std::string again;
    passepartout::encode(*value, again);
    if (again != bytes.substr(start, decoder.offset() - start)) fail("re-encoding differs", again);

    // The printed form reads back as the Value (NaN and infinities print as NIL).
    const std::string printed = passepartout::to_sexp(*value);
    passepartout::ReaderLimits reader_limits;
    reader_limits.max_bytes = std::numeric_limits<std::size_t>::max();
    reader_limits.max_depth = 64;
    auto back = passepartout::read_sexp(printed, reader_limits);
    if (!back) fail("printed form does not read", back.error().message + " in " + printed);
    if (passepartout::to_sexp(*back) != printed) fail("printed form reads differently", printed);
  }
  return 0;
}
