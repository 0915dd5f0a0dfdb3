// sha256_hex over Nettle; random_hex from getrandom(2).
#include "base/digest.hpp"
#include "base/errno_text.hpp"

#include <nettle/sha2.h>
#include <sys/random.h>

#include <cerrno>
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

}  // namespace passepartout
