// SHA-256 digests and Ed25519 signatures (Nettle) and random tokens
// (getrandom), for library pins, memory hashes, action hashes, approval
// tokens and the fleet's signed releases.
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

// Ed25519 (RFC 8032, Nettle's ed25519_sha512), keys and signatures as
// lower-case hex: a private key is 32 random bytes (64 digits), its public
// key 32 bytes, a signature 64 bytes (128 digits).
std::string ed25519_private_key();  // a new one; throws as random_hex does
// The public key of `private_hex`; "" when it is not a private key's hex.
std::string ed25519_public_key(std::string_view private_hex);
// `message` signed with `private_hex`; "" when it is not a private key's hex.
std::string ed25519_sign(std::string_view private_hex, std::string_view message);
// Whether `signature_hex` is `message` signed by the key `public_hex`
// (false for anything malformed).
bool ed25519_verify(std::string_view public_hex, std::string_view message, std::string_view signature_hex);

}  // namespace passepartout
