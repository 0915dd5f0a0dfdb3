// The host's credential rule: the configured keys, found and masked.
#include "pipeline/credential_rule.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

namespace passepartout {
namespace {

using Set = std::vector<KnownCredential>;

constexpr std::string_view kMask = "[MASKED]";

// The current set, published whole. Sets replaced are kept (the daemon sets
// one at start; tests a few), so a pointer read is never left dangling.
std::atomic<const Set*> current{nullptr};
std::mutex kept_mutex;
std::vector<std::unique_ptr<const Set>>& kept() {
  static std::vector<std::unique_ptr<const Set>> sets;
  return sets;
}

const Set* load() noexcept { return current.load(std::memory_order_acquire); }

const std::string* search(const Set& set, std::string_view text) {
  for (const KnownCredential& credential : set) {
    if (text.find(credential.secret) != std::string_view::npos) return &credential.origin;
  }
  return nullptr;
}

const std::string* search(const Set& set, const Value& value) {
  if (value.is_string() || value.is_keyword() || value.is_symbol()) return search(set, value.text());
  if (!value.is_list()) return nullptr;
  for (const Value& item : value.items()) {
    if (const std::string* origin = search(set, item)) return origin;
  }
  return nullptr;
}

}  // namespace

void KnownCredentials::set(std::vector<KnownCredential> credentials) {
  std::erase_if(credentials, [](const KnownCredential& c) { return c.secret.size() < kMinCredentialLength; });
  // Longest first: a key that contains another is masked whole.
  std::sort(credentials.begin(), credentials.end(),
            [](const KnownCredential& a, const KnownCredential& b) { return a.secret.size() > b.secret.size(); });
  std::lock_guard lock(kept_mutex);
  kept().push_back(std::make_unique<const Set>(std::move(credentials)));
  const Set* next = kept().back().get();
  current.store(next->empty() ? nullptr : next, std::memory_order_release);
}

bool KnownCredentials::empty() noexcept { return load() == nullptr; }

const std::string* KnownCredentials::found_in(const Value& value) {
  const Set* set = load();
  return set == nullptr ? nullptr : search(*set, value);
}

bool KnownCredentials::mask(std::string& text) {
  const Set* set = load();
  if (set == nullptr) return false;
  bool masked = false;
  for (const KnownCredential& credential : *set) {
    for (std::size_t at = text.find(credential.secret); at != std::string::npos;
         at = text.find(credential.secret, at + kMask.size())) {
      text.replace(at, credential.secret.size(), kMask);
      masked = true;
    }
  }
  return masked;
}

std::size_t CredentialStreamMask::ready_length() const noexcept {
  std::size_t keep = 0;  // the longest end of held_ that is the start of a key
  if (const Set* set = load()) {
    const std::string_view held(held_);
    for (const KnownCredential& credential : *set) {
      const std::string_view key(credential.secret);
      for (std::size_t length = std::min(key.size() - 1, held.size()); length > keep; --length) {
        if (held.substr(held.size() - length) == key.substr(0, length)) {
          keep = length;
          break;
        }
      }
    }
  }
  std::size_t ready = held_.size() - keep;
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (ready > 0 && ready < held_.size() && (static_cast<unsigned char>(held_[ready]) & 0xC0U) == 0x80U) --ready;
  return ready;
}

}  // namespace passepartout
