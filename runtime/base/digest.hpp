// SHA-256 digests (Nettle) and random tokens (getrandom), for library pins, memory
// hashes, action hashes and approval tokens.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace passepartout {

// Lower-case hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

// `bytes` bytes from the operating system's secure random source, as
// lower-case hex. Throws std::runtime_error if the source fails.
std::string random_hex(std::size_t bytes);

}  // namespace passepartout
