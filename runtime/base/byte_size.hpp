// Sizes in bytes as people write them in manifests and configs ("256MiB")
// and as messages show them ("256 MiB").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace passepartout {

// "1 GiB", "256 MiB", "1536 KiB", "1000 bytes".
std::string size_text(std::uint64_t bytes);

// Reads a size as written in a manifest or a config: "268435456", "256MiB", "256 MiB",
// "1GiB", "64KiB". The error says what is wrong ("use KiB, MiB or GiB").
Result<std::uint64_t> parse_size(std::string_view text);

}  // namespace passepartout
