// sha256_hex over Nettle; random_hex from getrandom(2).
#include "base/digest.hpp"
#include "base/errno_text.hpp"

#include <nettle/eddsa.h>
#include <nettle/sha2.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace passepartout {
namespace {

std::string to_hex(const unsigned char* data, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(size * 2, '0');
  for (std::size_t i = 0; i < size; ++i) {
    hex[2 * i] = kDigits[data[i] >> 4];
    hex[2 * i + 1] = kDigits[data[i] & 0x0f];
  }
  return hex;
}

// `hex` (exactly `size` bytes of it, either case) into `out`; false otherwise.
bool from_hex(std::string_view hex, std::uint8_t* out, std::size_t size) {
  if (hex.size() != size * 2) return false;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < size; ++i) {
    const int high = digit(hex[2 * i]);
    const int low = digit(hex[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<std::uint8_t>(high * 16 + low);
  }
  return true;
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  sha256_ctx context;
  sha256_init(&context);
  sha256_update(&context, bytes.size(), reinterpret_cast<const std::uint8_t*>(bytes.data()));
  unsigned char digest[SHA256_DIGEST_SIZE];
  sha256_digest(&context, sizeof digest, digest);
  return to_hex(digest, sizeof digest);
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  std::size_t filled = 0;
  while (filled < buffer.size()) {
    // Blocks only until the kernel's pool is first initialised at boot.
    const ssize_t got = ::getrandom(buffer.data() + filled, buffer.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("the secure random source failed: ") + errno_text(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  return to_hex(buffer.data(), buffer.size());
}

std::string ed25519_private_key() { return random_hex(ED25519_KEY_SIZE); }

std::string ed25519_public_key(std::string_view private_hex) {
  std::uint8_t priv[ED25519_KEY_SIZE];
  if (!from_hex(private_hex, priv, sizeof priv)) return {};
  std::uint8_t pub[ED25519_KEY_SIZE];
  ed25519_sha512_public_key(pub, priv);
  return to_hex(pub, sizeof pub);
}

std::string ed25519_sign(std::string_view private_hex, std::string_view message) {
  std::uint8_t priv[ED25519_KEY_SIZE];
  if (!from_hex(private_hex, priv, sizeof priv)) return {};
  std::uint8_t pub[ED25519_KEY_SIZE];
  ed25519_sha512_public_key(pub, priv);
  std::uint8_t signature[ED25519_SIGNATURE_SIZE];
  ed25519_sha512_sign(pub, priv, message.size(), reinterpret_cast<const std::uint8_t*>(message.data()), signature);
  return to_hex(signature, sizeof signature);
}

bool ed25519_verify(std::string_view public_hex, std::string_view message, std::string_view signature_hex) {
  std::uint8_t pub[ED25519_KEY_SIZE];
  std::uint8_t signature[ED25519_SIGNATURE_SIZE];
  if (!from_hex(public_hex, pub, sizeof pub) || !from_hex(signature_hex, signature, sizeof signature)) return false;
  return ed25519_sha512_verify(pub, message.size(), reinterpret_cast<const std::uint8_t*>(message.data()), signature) ==
         1;
}

}  // namespace passepartout
