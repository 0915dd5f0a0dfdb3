// Sizes in bytes, read and written with binary units.
#include "base/byte_size.hpp"

#include <charconv>
#include <system_error>

namespace passepartout {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

std::string size_text(std::uint64_t bytes) {
  struct Unit {
    std::uint64_t size;
    const char* name;
  };
  for (const Unit unit : {Unit{std::uint64_t{1} << 30, "GiB"}, Unit{std::uint64_t{1} << 20, "MiB"},
                          Unit{std::uint64_t{1} << 10, "KiB"}}) {
    if (bytes >= unit.size && bytes % unit.size == 0) return std::to_string(bytes / unit.size) + " " + unit.name;
  }
  return std::to_string(bytes) + " bytes";
}

Result<std::uint64_t> parse_size(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return fail(ErrorCode::invalid_input, why + "; write bytes or a number with KiB, MiB or GiB, such as 256MiB");
  };
  std::uint64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (end == text.data()) return bad("a size starts with digits");
  if (ec == std::errc::result_out_of_range) return bad("the number is too large");
  std::string_view unit = text.substr(static_cast<std::size_t>(end - text.data()));
  while (!unit.empty() && is_blank(unit.front())) unit.remove_prefix(1);
  unsigned shift = 0;
  if (unit.empty() || unit == "B" || unit == "bytes") {
    shift = 0;
  } else if (unit == "KiB") {
    shift = 10;
  } else if (unit == "MiB") {
    shift = 20;
  } else if (unit == "GiB") {
    shift = 30;
  } else if (unit == "TiB") {
    shift = 40;
  } else {
    return bad("unknown unit '" + std::string(unit) + "' (units are powers of 1024)");
  }
  if (number > (~std::uint64_t{0} >> shift)) return bad("the number is too large");
  return number << shift;
}

}  // namespace passepartout
