// The keys this process holds for its model providers, and the host's rule
// that no action carries one anywhere (seed I1 step 5, I6).
//
// The dispatcher skill blocks what looks like a secret; it cannot know the
// exact keys the daemon was configured with (handing them to a skill would
// be a leak of its own), and its check holds only while it is loaded. So the
// host checks every verification itself, before any gate, against the keys
// it was given: an action that contains one, in any string, is blocked by
// the host's "credential-rule" (verifier.hpp; trace version "host"), whichever skills are loaded.
// The same keys are masked in the gate log, the session transcripts and the
// prompts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "value/value.hpp"

namespace passepartout {

// A key and where it came from ("OPENAI_API_KEY", "key file /etc/...") for
// the block's reason, which never shows the key itself.
struct KnownCredential {
  std::string secret;
  std::string origin;
};

// Keys shorter than this are not checked: they would match ordinary text.
inline constexpr std::size_t kMinCredentialLength = 8;

class KnownCredentials {
 public:
  // Replaces the set (the daemon, at start, with every configured
  // provider's key). Keys shorter than kMinCredentialLength are ignored.
  // Any thread; meant for start-up: a replaced set is kept until the process
  // ends, so a reader never holds a dangling one.
  static void set(std::vector<KnownCredential> credentials);
  // True when there is none (the common case of a scripted or local model).
  static bool empty() noexcept;
  // The origin of the first key found in any string of `value` (keywords
  // and symbols too), or nullptr.
  static const std::string* found_in(const Value& value);
  // Masks every known key in `text` in place; false when there was none.
  static bool mask(std::string& text);
};

// Masks keys in streamed text, whose pieces may split a key anywhere: only
// an end of the text that could be the start of a key is held back until
// the next piece tells (ordinary text passes at once), and flush() passes
// on the rest. With no key configured every piece passes at once, unchanged.
class CredentialStreamMask {
 public:
  template <class Emit>
  void feed(std::string_view piece, Emit&& emit) {
    if (KnownCredentials::empty() && held_.empty()) {
      emit(piece);
      return;
    }
    held_ += piece;
    KnownCredentials::mask(held_);
    const std::size_t ready = ready_length();
    if (ready == 0) return;
    emit(std::string_view(held_).substr(0, ready));
    held_.erase(0, ready);
  }
  template <class Emit>
  void flush(Emit&& emit) {
    if (held_.empty()) return;
    KnownCredentials::mask(held_);
    emit(std::string_view(held_));
    held_.clear();
  }

 private:
  // How much of held_ may go: all but its longest end that begins a key,
  // cut back to the start of a UTF-8 character.
  std::size_t ready_length() const noexcept;
  std::string held_;
};

}  // namespace passepartout
